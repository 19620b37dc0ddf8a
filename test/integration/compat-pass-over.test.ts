/**
 * Compat mode's release (compat-release.lua) and a queued waiter whose inbox nobody listens on:
 * the same rule as the normal mode's releases (docs/safety.md, "A waiter nobody hears"). Passed
 * over once, its entry kept in place and marked " -"; dropped when a second release finds it
 * still unheard; its own next attempt (compat-acquire.lua) writes the entry anew, clearing the
 * mark; an entry whose deadline passed is dropped at once. On one real Redis: the scripts called
 * directly (a listener is a raw subscriber on the waiter's inbox channel), then compat managers
 * with a waiter process killed with SIGKILL.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { FENCE_RETENTION } from '../../src/backend/backend.js';
import { COMPAT_LINGER } from '../../src/backend/compat-backend.js';
import { createLocks, type Locks } from '../../src/index.js';
import { lockKeys, type LockKeys } from '../../src/keys.js';
import { compatAcquireScript, compatReleaseScript } from '../../src/lua/scripts.generated.js';
import { uniquePrefix, useRedisServer } from '../helpers/harness.js';

const redis = useRedisServer();

const TTL = '10000';
const ENTRY_TTL = '30000';
const [H, A, B, C] = ['aa01', 'bb02', 'cc03', 'dd04'];

async function script(source: string, keys: string[], args: string[]): Promise<unknown> {
  return redis.raw.eval(source, keys.length, ...keys, ...args);
}

/** compat-acquire and compat-release on one lock, in milliseconds mode, as compat-backend.ts calls them. */
function compatScripts(keys: LockKeys, legacyKey: string, inboxes: string) {
  return {
    acquire: (token: string, member = '') =>
      script(compatAcquireScript.source, [legacyKey, keys.owner, keys.fence, keys.queue, keys.alive], [token, TTL, String(FENCE_RETENTION), member, ENTRY_TTL, '1', String(COMPAT_LINGER)]),
    release: (token: string) => script(compatReleaseScript.source, [legacyKey, keys.owner, keys.queue, keys.alive, keys.holder], [token, inboxes]),
  };
}

/** A raw subscriber listening on `channel`, with the messages it got. */
async function listenOn(channel: string): Promise<{ messages: string[]; close(): void }> {
  const sub = new Redis(redis.server.port, '127.0.0.1');
  const messages: string[] = [];
  sub.on('message', (_c: string, m: string) => messages.push(m));
  await sub.subscribe(channel);
  return { messages, close: () => sub.disconnect() };
}

/** A fresh compat lock: its legacy key (prefix + name), latchkey's keys beside it, and the inbox prefix. */
function compatLock(name: string): { keys: LockKeys; legacyKey: string; inboxes: string } {
  const prefix = uniquePrefix();
  return { keys: lockKeys(prefix, name), legacyKey: `${prefix}${name}`, inboxes: `${prefix}inbox:` };
}

describe('compat mode: a queued waiter nobody hears', () => {
  it('a release passes it over once (entry kept in place, marked) and wakes the next; after its next attempt it is woken at a later release and gets the lock', async () => {
    const { keys, legacyKey, inboxes } = compatLock('pass');
    const { acquire, release } = compatScripts(keys, legacyKey, inboxes);
    const b = await listenOn(`${inboxes}mB`);
    try {
      expect(await acquire(H)).toEqual([1, expect.any(Number)]);
      expect(await acquire(A, 'mA:1')).toEqual([0, expect.any(Number)]); // mA: between subscriptions
      expect(await acquire(B, 'mB:1')).toEqual([0, expect.any(Number)]);
      expect(await release(H)).toBe(1);
      await expect.poll(() => b.messages).toEqual(['mB:1 0']);
      expect(await redis.raw.zrange(keys.queue, '0', '-1')).toEqual(['mA:1', 'mB:1']);
      expect(await redis.raw.hget(keys.alive, 'mA:1')).toMatch(new RegExp(` ${A} -$`));
      // The woken waiter goes past the marked entry; A keeps its place.
      expect(await acquire(B, 'mB:1')).toEqual([1, expect.any(Number)]);
      expect(await redis.raw.zrange(keys.queue, '0', '-1')).toEqual(['mA:1']);
      // A listens again and looks: its attempt writes its entry anew, without the mark.
      const a = await listenOn(`${inboxes}mA`);
      try {
        expect(await acquire(A, 'mA:1')).toEqual([0, expect.any(Number)]);
        expect(await redis.raw.hget(keys.alive, 'mA:1')).toMatch(new RegExp(` ${A}$`));
        expect(await release(B)).toBe(1);
        await expect.poll(() => a.messages).toEqual(['mA:1 0']);
        expect(await acquire(A, 'mA:1')).toEqual([1, expect.any(Number)]);
        expect(await redis.raw.zcard(keys.queue)).toBe(0);
        expect(await release(A)).toBe(1);
      } finally {
        a.close();
      }
    } finally {
      b.close();
    }
  });

  it('a second release that finds it still unheard (no attempt in between) drops it; an expired entry is dropped at once', async () => {
    const { keys, legacyKey, inboxes } = compatLock('drop');
    const { acquire, release } = compatScripts(keys, legacyKey, inboxes);
    expect(await acquire(H)).toEqual([1, expect.any(Number)]);
    expect(await acquire(A, 'mA:1')).toEqual([0, expect.any(Number)]);
    expect(await release(H)).toBe(1); // nobody hears A: marked, kept
    expect(await redis.raw.zrange(keys.queue, '0', '-1')).toEqual(['mA:1']);
    expect(await redis.raw.hget(keys.alive, 'mA:1')).toMatch(/ -$/);
    expect(await acquire(C)).toEqual([1, expect.any(Number)]); // a newcomer takes the free lock
    expect(await release(C)).toBe(1); // A unheard again: dropped
    expect(await redis.raw.zcard(keys.queue)).toBe(0);
    expect(await redis.raw.hlen(keys.alive)).toBe(0);

    // An entry at its deadline (it made no attempt for 3 rechecks) is dropped by the first release.
    expect(await acquire(H)).toEqual([1, expect.any(Number)]);
    await redis.raw.zadd(keys.queue, 1, 'mA:2');
    await redis.raw.hset(keys.alive, 'mA:2', `${Date.now() - 60_000} ${TTL} ${A}`);
    expect(await release(H)).toBe(1);
    expect(await redis.raw.zcard(keys.queue)).toBe(0);
    expect(await redis.raw.hlen(keys.alive)).toBe(0);
  });

  it('a legacy holder ended by forceRelease ("legacy:<value>") passes an unheard waiter over the same way', async () => {
    const { keys, legacyKey, inboxes } = compatLock('legacy');
    const { acquire, release } = compatScripts(keys, legacyKey, inboxes);
    const value = String(Date.now() + 60_000);
    await redis.raw.set(legacyKey, value); // SETNX by a legacy client: no expiry
    expect(await acquire(A, 'mA:1')).toEqual([0, expect.any(Number)]);
    expect(await release(`legacy:${value}`)).toBe(1);
    expect(await redis.raw.exists(legacyKey)).toBe(0);
    expect(await redis.raw.zrange(keys.queue, '0', '-1')).toEqual(['mA:1']);
    expect(await redis.raw.hget(keys.alive, 'mA:1')).toMatch(/ -$/);
  });
});

describe('compat mode: a waiter whose process was killed', () => {
  function manager(prefix: string, recheck?: number): Locks {
    const client = new Redis(redis.server.port, '127.0.0.1');
    const locks = createLocks({ redis: client, prefix, compat: 'timestamp', ...(recheck ? { recheck } : {}) });
    redis.cleanup.push(async () => {
      await locks.close();
      client.disconnect();
    });
    return locks;
  }

  it('does not block others: the next waiter is woken at the release, and the dead entry is dropped at the release after', async () => {
    const prefix = uniquePrefix();
    const keys = lockKeys(prefix, 'ghost');
    const holder = await manager(prefix).acquire('ghost', { ttl: 30_000 });
    // The built package (npm run build), as a separate process that queues, then dies.
    const child = spawn(process.execPath, [new URL('../helpers/waiter-process.mjs', import.meta.url).pathname, redis.server.url, prefix, 'ghost', 'compat'], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    await once(createInterface({ input: child.stdout! }), 'line');
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
    const [dead] = await redis.raw.zrange(keys.queue, '0', '0');
    // A recheck far above the time asserted below: only the release can wake this waiter in time.
    const live = manager(prefix, 5000);
    const waiting = live.acquire('ghost', { wait: 10_000 });
    await expect.poll(() => redis.raw.zcard(keys.queue), { timeout: 2000, interval: 5 }).toBe(2);
    const released = performance.now();
    await holder.release(); // the dead waiter's inbox has no subscriber: passed over, the live one woken
    const lease = await waiting;
    expect(performance.now() - released).toBeLessThan(500); // not its 5 s recheck, nor the 30 s TTL
    expect(await redis.raw.zrange(keys.queue, '0', '-1')).toEqual([dead]); // kept once, marked
    expect(await redis.raw.hget(keys.alive, dead!)).toMatch(/ -$/);
    await lease.release(); // unheard again: dropped
    expect(await redis.raw.zcard(keys.queue)).toBe(0);
    expect(await redis.raw.hlen(keys.alive)).toBe(0);
  });
});
