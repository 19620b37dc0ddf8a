/**
 * How a timeout learns who holds the lock (issue 18) on a real server: without a round trip of its
 * own, from acquire.lua's busy reply, which reads the holder record only when the attempt passes
 * the holder key. The first attempt of an acquire (the uncontended one) does not, so its call is
 * what it was. The shared cases (named, not named, stale records) are in
 * test/contract/timeout-holder-contract.ts.
 */
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { createLocks, LockTimeoutError, type Locks, type LocksOptions } from '../../src/index.js';
import { acquireCall, acquireReply } from '../../src/backend/redis-backend.js';
import { adaptClient } from '../../src/client/detect.js';
import { lockKeys } from '../../src/keys.js';
import { runScript } from '../../src/lua/run-script.js';
import { acquireScript } from '../../src/lua/scripts.generated.js';
import { uniquePrefix, useRedisServer } from '../helpers/harness.js';

const redis = useRedisServer();

function manager(options: Omit<LocksOptions, 'redis'>): Locks {
  const client = new Redis(redis.server.port, '127.0.0.1');
  const locks = createLocks({ ...options, redis: client });
  redis.cleanup.push(async () => {
    await locks.close();
    client.disconnect();
  });
  return locks;
}

/** The key counts of the acquire.lua calls the server ran since the last call, oldest first (SLOWLOG logs every command at threshold 0). */
async function acquireKeyCounts(): Promise<number[]> {
  const entries = (await redis.raw.slowlog('GET', 1000)) as [number, number, number, string[]][];
  await redis.raw.slowlog('RESET');
  return entries
    .map((entry) => entry[3])
    .filter((args) => /^evalsha$/i.test(args[0]!) && args[1] === acquireScript.sha)
    .map((args) => Number(args[2]))
    .reverse();
}

describe('a timeout names the holder without a round trip of its own', () => {
  it('the first attempt of an acquire sends no holder key (unless wait is 0); the attempts after it do', async () => {
    const prefix = uniquePrefix();
    const [a, b] = [manager({ prefix, holder: 'job-1' }), manager({ prefix })];
    await redis.raw.config('SET', 'slowlog-max-len', '1000');
    await redis.raw.config('SET', 'slowlog-log-slower-than', '0');
    try {
      await redis.raw.slowlog('RESET');
      // Uncontended, before any wait opened the manager's inbox: lock and fence keys only.
      await (await b.acquire('free')).release();
      expect(await acquireKeyCounts()).toEqual([2]);

      const held = await a.acquire('busy', { ttl: 10_000 });
      await expect.poll(async () => (await a.inspect('busy')).holder?.who).toBe('job-1');
      await acquireKeyCounts();
      const error = (await b.acquire('busy', { wait: 150 }).catch((e: unknown) => e)) as LockTimeoutError;
      expect(error).toBeInstanceOf(LockTimeoutError);
      expect(error.holder).toBe('job-1');
      const counts = await acquireKeyCounts();
      // The probe: 2 keys; then, once the inbox listens, queued attempts with the holder key: 5.
      expect(counts[0]).toBe(2);
      expect(counts.length).toBe(error.attempts);
      expect(counts.slice(1).every((n) => n === 3 || n === 5)).toBe(true);
      expect(counts.at(-1)).toBe(5);

      // Uncontended again, the inbox now listening: the queue's keys, still no holder key.
      await (await b.acquire('free')).release();
      expect(await acquireKeyCounts()).toEqual([4]);
      // wait: 0 is one attempt: it asks at once.
      expect(await b.acquire('busy', { wait: 0 }).catch((e: unknown) => (e as LockTimeoutError).holder)).toBe('job-1');
      expect(await acquireKeyCounts()).toEqual([5]);
      // A wait without end never times out: it never asks.
      const controller = new AbortController();
      const endless = b.acquire('busy', { wait: Infinity, signal: controller.signal }).catch(() => undefined);
      await new Promise((r) => setTimeout(r, 50));
      controller.abort();
      await endless;
      expect((await acquireKeyCounts()).every((n) => n === 4)).toBe(true);
      await held.release();
    } finally {
      await redis.raw.config('SET', 'slowlog-log-slower-than', '10000');
    }
  });

  it('acquire.lua ignores a holder key of another type: the waiter is queued, the reply names nobody', async () => {
    const keys = lockKeys(uniquePrefix(), 'odd');
    const client = adaptClient(redis.raw);
    await redis.raw.set(keys.lock, 'tok', 'PX', 10_000);
    await redis.raw.set(keys.holder, 'not a hash');
    const call = acquireCall(keys, 'mine', 5000, { member: 'm:1', entryTtl: 3000 }, undefined, true);
    const reply = acquireReply(await runScript(client, acquireScript, call.keys, call.args), acquireScript);
    expect(reply).toEqual({ acquired: false, ttl: expect.any(Number) });
    expect(await redis.raw.zscore(keys.queue, 'm:1')).not.toBeNull();
  });

  it('compat mode: a latchkey holder that records itself is named; a legacy holder is not', async () => {
    const prefix = uniquePrefix();
    const [a, b] = [manager({ prefix, compat: 'timestamp', holder: 'new-service' }), manager({ prefix, compat: 'timestamp' })];
    const held = await a.acquire('shared', { ttl: 10_000 });
    await expect.poll(async () => (await a.inspect('shared')).holder?.who).toBe('new-service');
    const named = (await b.acquire('shared', { wait: 120 }).catch((e: unknown) => e)) as LockTimeoutError;
    expect(named).toBeInstanceOf(LockTimeoutError);
    expect(named.holder).toBe('new-service');
    await held.release();
    // A legacy client's SETNX of an expiry timestamp (no PX): no record is read for it.
    await redis.raw.set(`${prefix}legacy`, String(Date.now() + 10_000));
    const anonymous = (await b.acquire('legacy', { wait: 120 }).catch((e: unknown) => e)) as LockTimeoutError;
    expect(anonymous).toBeInstanceOf(LockTimeoutError);
    expect(anonymous.holder).toBeUndefined();
    expect(anonymous.message).toContain('held by another owner');
  });
});
