/**
 * Waiting and keeping on a real Redis: what the waiters cost Redis while they wait, a dead queued
 * waiter, leaving the queue, and the watchdog when the key is deleted or the server is stopped.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { LeaseLostError, type Locks } from '../../src/index.js';
import { uniquePrefix, useRedisServer, managerOver } from '../helpers/harness.js';
import { RedisServer } from '../helpers/redis-server.js';
import { lockKeys } from '../../src/keys.js';
import { aborted } from '../contract/lock-contract.js';

const redis = useRedisServer();
const cleanup = redis.cleanup;

function manager(settings: { prefix: string; recheck?: number }, port = redis.server.port): Locks {
  const client = new Redis(port, '127.0.0.1');
  return managerOver(cleanup, [client], { ...settings, redis: client });
}

async function scriptCalls(): Promise<number> {
  const info = await redis.raw.info('commandstats');
  let calls = 0;
  for (const m of info.matchAll(/cmdstat_(evalsha|eval):calls=(\d+)/g)) calls += Number(m[2]);
  return calls;
}

describe('waiting on Redis', () => {
  it('50 callers waiting in one process cost Redis about one attempt per recheck, not one per caller', async () => {
    const prefix = uniquePrefix();
    const holder = await manager({ prefix }).acquire('idle', { ttl: 30_000 });
    const waiters = manager({ prefix, recheck: 100 });
    const waiting = Array.from({ length: 50 }, () => waiters.acquire('idle', { wait: 30_000 }));
    await expect.poll(() => redis.raw.zcard(`${prefix}{idle}:queue`), { timeout: 2000, interval: 5 }).toBe(1);
    const before = await scriptCalls();
    await new Promise((r) => setTimeout(r, 500)); // a window to count attempts in
    const attempts = (await scriptCalls()) - before;
    expect(attempts).toBeLessThanOrEqual(8); // the head's rechecks (every 100 ms), nobody else
    await holder.release();
    for (const w of waiting) await (await w).release();
  });

  it('a queued waiter whose process was killed is skipped: the next waiter is granted the lock at once', async () => {
    const prefix = uniquePrefix();
    const holder = await manager({ prefix }).acquire('ghost', { ttl: 30_000 });
    const child = spawn(process.execPath, [new URL('../helpers/waiter-process.mjs', import.meta.url).pathname, redis.server.url, prefix, 'ghost'], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    await once(createInterface({ input: child.stdout! }), 'line');
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
    const live = manager({ prefix, recheck: 200 });
    const waiting = live.acquire('ghost', { wait: 10_000 });
    await expect.poll(() => redis.raw.zcard(`${prefix}{ghost}:queue`), { timeout: 2000, interval: 5 }).toBe(2);
    const released = performance.now();
    await holder.release(); // the dead waiter's inbox has no subscriber: the release skips it
    const lease = await waiting;
    expect(performance.now() - released).toBeLessThan(150); // not its 200 ms recheck, nor the 30 s TTL
    await lease.release();
  });

  it('a waiter granted the lock by a release holds the fence Redis recorded, above the holder\'s (the grant message carries every digit)', async () => {
    const prefix = uniquePrefix();
    const keys = lockKeys(prefix, 'digits');
    // A counter ahead of the clock, ending in 36: the holder gets ...37 and the grant ...38. A fence
    // written into the message by Lua's own number formatting (14 significant digits) read ...00.
    const ahead = (BigInt(Date.now()) * 1000n + 10_000_000_000n) / 100n * 100n + 36n;
    await redis.raw.set(keys.fence, String(ahead), 'PX', 60_000);
    const holder = await manager({ prefix }).acquire('digits', { ttl: 30_000 });
    expect(holder.fence).toBe(Number(ahead + 1n));
    const waiting = manager({ prefix, recheck: 60_000 }).acquire('digits', { wait: 10_000 });
    await expect.poll(() => redis.raw.zcard(keys.queue), { timeout: 2000, interval: 5 }).toBe(1);
    await holder.release();
    const lease = await waiting;
    expect(lease.fence).toBe(Number(await redis.raw.get(keys.fence)));
    expect(lease.fence).toBe(holder.fence + 1);
    await lease.release();
  });

  it('a waiter that gives up leaves the Redis queue', async () => {
    const prefix = uniquePrefix();
    const holder = await manager({ prefix }).acquire('quit', { ttl: 30_000 });
    const locks = manager({ prefix });
    const controller = new AbortController();
    const waiting = locks.acquire('quit', { signal: controller.signal }).catch((e: unknown) => e);
    await expect.poll(() => redis.raw.zcard(`${prefix}{quit}:queue`), { timeout: 2000, interval: 5 }).toBe(1);
    controller.abort(new Error('stop'));
    await waiting;
    await expect.poll(() => redis.raw.zcard(`${prefix}{quit}:queue`), { timeout: 2000, interval: 5 }).toBe(0);
    await holder.release();
    expect(await redis.raw.exists(`${prefix}{quit}`)).toBe(0); // freed, not granted to the waiter that left
  });
});

describe('the watchdog on Redis', () => {
  it('keeps a lease alive across several TTLs and stops on release', async () => {
    const prefix = uniquePrefix();
    const locks = manager({ prefix });
    const lease = await locks.acquire('kept', { ttl: 100, renew: true });
    await new Promise((r) => setTimeout(r, 450));
    expect(lease.held).toBe(true);
    expect(await redis.raw.pttl(`${prefix}{kept}`)).toBeGreaterThan(0);
    await lease.release();
    expect(await redis.raw.exists(`${prefix}{kept}`)).toBe(0);
  });

  it('signals loss as "unreachable" before the validity ends when the Redis server is frozen', async () => {
    const frozen = await RedisServer.start();
    try {
      const prefix = uniquePrefix();
      const locks = manager({ prefix }, frozen.port);
      const lease = await locks.acquire('frozen', { ttl: 300, renew: true });
      frozen.pause();
      const reason = await aborted(lease.signal);
      expect(reason).toBeInstanceOf(LeaseLostError);
      expect(reason).toMatchObject({ reason: 'unreachable' });
      expect(performance.now()).toBeLessThanOrEqual(lease.validUntil + 50);
      frozen.resume();
    } finally {
      await frozen.stop();
    }
  });

  it('signals loss when the server is killed', async () => {
    const dying = await RedisServer.start();
    try {
      const prefix = uniquePrefix();
      const locks = manager({ prefix }, dying.port);
      const lease = await locks.acquire('killed', { ttl: 300, renew: true });
      await dying.kill();
      const reason = await aborted(lease.signal);
      expect(reason).toMatchObject({ code: 'LEASE_LOST', reason: 'unreachable' });
    } finally {
      await dying.stop();
    }
  });
});
