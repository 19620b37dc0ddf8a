/**
 * The release scripts' rule for a queued waiter whose inbox nobody listens on (docs/safety.md,
 * "A waiter nobody hears"): passed over once, its entry kept in place and marked; dropped when
 * found unheard again; its own next attempt writes the entry anew. On one real Redis, calling the
 * scripts directly (a listener is a raw subscriber on the waiter's inbox channel).
 */
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { FENCE_RETENTION } from '../../src/backend/backend.js';
import { lockKeys, semaphoreKeys } from '../../src/keys.js';
import { acquireScript, releaseScript, semaphoreAcquireScript, semaphoreReleaseScript, wakeReleaseScript } from '../../src/lua/scripts.generated.js';
import { uniquePrefix, useRedisServer } from '../helpers/harness.js';

const redis = useRedisServer();

const TTL = '10000';
const ENTRY_TTL = '30000';
const [H, A, B, C] = ['aa01', 'bb02', 'cc03', 'dd04'];

async function script(source: string, keys: string[], args: string[]): Promise<unknown> {
  return redis.raw.eval(source, keys.length, ...keys, ...args);
}

/** A raw subscriber listening on `channel`, with the messages it got. */
async function listenOn(channel: string): Promise<{ messages: string[]; close(): void }> {
  const sub = new Redis(redis.server.port, '127.0.0.1');
  const messages: string[] = [];
  sub.on('message', (_c: string, m: string) => messages.push(m));
  await sub.subscribe(channel);
  return { messages, close: () => sub.disconnect() };
}

describe('a queued waiter nobody hears', () => {
  it('a lock release passes it over once (entry kept in place, marked), grants the next, and drops it when unheard again', async () => {
    const prefix = uniquePrefix();
    const keys = lockKeys(prefix, 'pass');
    const inboxes = `${prefix}inbox:`;
    const acquire = (token: string, member?: string) =>
      script(acquireScript.source, member ? [keys.lock, keys.fence, keys.queue, keys.alive] : [keys.lock, keys.fence], member ? [token, TTL, '', member, ENTRY_TTL] : [token, TTL]);
    const release = (token: string) =>
      script(releaseScript.source, [keys.lock, keys.fence, keys.queue, keys.alive], [token, inboxes]);
    const b = await listenOn(`${inboxes}mB`);
    try {
      expect(await acquire(H)).toBeGreaterThan(0);
      expect(await acquire(A, 'mA:1')).toEqual([0, expect.any(Number)]); // mA: nobody listens
      expect(await acquire(B, 'mB:1')).toEqual([0, expect.any(Number)]);
      expect(await release(H)).toBe(1);
      expect(await redis.raw.get(keys.lock)).toBe(B);
      expect(await redis.raw.zrange(keys.queue, '0', '-1')).toEqual(['mA:1']);
      expect(await redis.raw.hget(keys.alive, 'mA:1')).toMatch(new RegExp(` ${A} -$`));
      await expect.poll(() => b.messages.length).toBe(1);
      // Its own next attempt writes the entry anew: it lives, and keeps its place.
      expect(await acquire(A, 'mA:1')).toEqual([0, expect.any(Number)]);
      expect(await redis.raw.hget(keys.alive, 'mA:1')).toMatch(new RegExp(` ${A}$`));
      // Unheard at the next release: passed over once more (its attempt cleared the mark); unheard again after that, dropped.
      expect(await release(B)).toBe(1);
      expect(await redis.raw.get(keys.lock)).toBeNull();
      expect(await redis.raw.zrange(keys.queue, '0', '-1')).toEqual(['mA:1']);
      expect(await acquire(C)).toBeGreaterThan(0);
      expect(await release(C)).toBe(1);
      expect(await redis.raw.zcard(keys.queue)).toBe(0);
      expect(await redis.raw.hlen(keys.alive)).toBe(0);
    } finally {
      b.close();
    }
  });

  it('a wake-release (Redlock, replica acknowledgement) passes it over once and wakes the next', async () => {
    const prefix = uniquePrefix();
    const keys = lockKeys(prefix, 'wake');
    const inboxes = `${prefix}inbox:`;
    const b = await listenOn(`${inboxes}mB`);
    try {
      await redis.raw.set(keys.lock, H);
      await redis.raw.zadd(keys.queue, 1, 'mA:1', 2, 'mB:1');
      const deadline = Date.now() + 30_000;
      await redis.raw.hset(keys.alive, 'mA:1', `${deadline} ${TTL} ${A}`, 'mB:1', `${deadline} ${TTL} ${B}`);
      const wakeRelease = (token: string) => script(wakeReleaseScript.source, [keys.lock, keys.queue, keys.alive, keys.holder], [token, inboxes]);
      expect(await wakeRelease(H)).toBe(1);
      await expect.poll(() => b.messages).toEqual(['mB:1 0']);
      expect(await redis.raw.zrange(keys.queue, '0', '-1')).toEqual(['mA:1', 'mB:1']);
      expect(await redis.raw.hget(keys.alive, 'mA:1')).toMatch(/ -$/);
      await redis.raw.set(keys.lock, C);
      expect(await wakeRelease(C)).toBe(1);
      expect(await redis.raw.zrange(keys.queue, '0', '-1')).toEqual(['mB:1']);
    } finally {
      b.close();
    }
  });

  it('a fair lock passes it over once: the next waiter goes first, and it keeps its place for the turn after', async () => {
    const prefix = uniquePrefix();
    const keys = semaphoreKeys(prefix, 'fair', { limit: 1, permits: 1 }, 'fair');
    const inboxes = `${prefix}inbox:`;
    const sKeys = [keys.lock, keys.holder, keys.fence, keys.queue, keys.alive];
    const acquire = (token: string, member: string) => script(semaphoreAcquireScript.source, sKeys, [token, TTL, String(FENCE_RETENTION), '1', '1', member, ENTRY_TTL, inboxes, '0']);
    const release = (token: string) => script(semaphoreReleaseScript.source, [keys.lock, keys.holder, keys.queue, keys.alive], [token, inboxes, '0']);
    const c = await listenOn(`${inboxes}mC`);
    try {
      expect(await acquire(H, '')).toEqual([1, expect.any(Number)]);
      expect(await acquire(B, 'mB:1')).toEqual([0, expect.any(Number)]); // mB: between subscriptions
      expect(await acquire(C, 'mC:1')).toEqual([0, expect.any(Number)]);
      expect(await release(H)).toBe(1);
      await expect.poll(() => c.messages).toEqual(['mC:1 0']);
      expect(await redis.raw.hget(keys.alive, 'mB:1')).toMatch(/ -$/);
      // C goes past the marked entry; B keeps its place (first in the queue).
      expect(await acquire(C, 'mC:1')).toEqual([1, expect.any(Number)]);
      expect(await redis.raw.zrange(keys.queue, '0', '-1')).toEqual(['mB:1']);
      // B listens again and looks (its attempt writes its entry anew): it is first for the next turn.
      const b = await listenOn(`${inboxes}mB`);
      try {
        expect(await acquire(B, 'mB:1')).toEqual([0, expect.any(Number)]);
        expect(await redis.raw.hget(keys.alive, 'mB:1')).not.toMatch(/ -$/);
        expect(await acquire(A, 'mA:1')).toEqual([0, expect.any(Number)]);
        expect(await release(C)).toBe(1);
        await expect.poll(() => b.messages).toEqual(['mB:1 0']);
        expect(await acquire(A, 'mA:1')).toEqual([0, expect.any(Number)]); // not A's turn
        expect(await acquire(B, 'mB:1')).toEqual([1, expect.any(Number)]);
      } finally {
        b.close();
      }
    } finally {
      c.close();
    }
  });

  it('a fair lock waiter whose own entry is marked is not held back by it', async () => {
    const prefix = uniquePrefix();
    const keys = semaphoreKeys(prefix, 'own', { limit: 1, permits: 1 }, 'fair');
    const inboxes = `${prefix}inbox:`;
    const sKeys = [keys.lock, keys.holder, keys.fence, keys.queue, keys.alive];
    const acquire = (token: string, member: string) => script(semaphoreAcquireScript.source, sKeys, [token, TTL, String(FENCE_RETENTION), '1', '1', member, ENTRY_TTL, inboxes, '0']);
    const release = (token: string) => script(semaphoreReleaseScript.source, [keys.lock, keys.holder, keys.queue, keys.alive], [token, inboxes, '0']);
    expect(await acquire(H, '')).toEqual([1, expect.any(Number)]);
    expect(await acquire(B, 'mB:1')).toEqual([0, expect.any(Number)]);
    expect(await release(H)).toBe(1); // nobody hears B: marked, kept
    expect(await redis.raw.hget(keys.alive, 'mB:1')).toMatch(/ -$/);
    expect(await acquire(B, 'mB:1')).toEqual([1, expect.any(Number)]);
    expect(await redis.raw.zcard(keys.queue)).toBe(0);
  });
});
