/**
 * A wait queue's keys outlive every entry in them, whichever manager wrote last. Each queued
 * attempt makes the queue and alive keys outlive its own entry (2 × its entry ttl, 3 × the
 * manager's `recheck`); before, it set that expiry outright, so a manager with a short `recheck`
 * shortened the keys under the entries of one with a long one, which vanished with them: a writer
 * of a read-write lock lost its place to the readers behind it, and no release could grant a lock
 * to a waiter no longer queued.
 */
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import type { Locks } from '../../src/index.js';
import { managerOver, uniquePrefix, useRedisServer } from '../helpers/harness.js';

const redis = useRedisServer();

function manager(prefix: string, recheck: number): Locks {
  const client = new Redis(redis.server.port, '127.0.0.1');
  return managerOver(redis.cleanup, [client], { prefix, recheck, redis: client });
}

const LONG = 10_000; // recheck: entries live 30 s, their keys 60 s
const SHORT = 100; // recheck: entries live 300 ms

describe("a wait queue's keys", () => {
  it("a lock: a waiter with a short recheck does not shorten them under another's entry", async () => {
    const prefix = uniquePrefix();
    const [slow, quick] = [manager(prefix, LONG), manager(prefix, SHORT)];
    const held = await slow.acquire('k', { ttl: 30_000 });
    const other = manager(prefix, LONG);
    const queued = other.acquire('k', { ttl: 30_000, wait: 30_000 });
    await expect.poll(() => redis.raw.zcard(`${prefix}{k}:queue`), { timeout: 2000, interval: 5 }).toBe(1);
    // The quick manager's waiter queues too, and gives up.
    const giveUp = new AbortController();
    const quitting = quick.acquire('k', { wait: 30_000, signal: giveUp.signal });
    await expect.poll(() => redis.raw.zcard(`${prefix}{k}:queue`), { timeout: 2000, interval: 5 }).toBe(2);
    giveUp.abort(new Error('gave up'));
    await expect(quitting).rejects.toThrow('gave up');
    for (const key of [`${prefix}{k}:queue`, `${prefix}{k}:alive`]) {
      expect(await redis.raw.pttl(key)).toBeGreaterThan(30_000);
    }
    await held.release();
    await (await queued).release();
  });

  it("a semaphore: a waiter with a short recheck does not shorten them under another's entry", async () => {
    const prefix = uniquePrefix();
    const [slow, quick] = [manager(prefix, LONG), manager(prefix, SHORT)];
    const held = await slow.semaphore('pool', { limit: 1 }).acquire({ ttl: 30_000 });
    const queued = manager(prefix, LONG).semaphore('pool', { limit: 1 }).acquire({ ttl: 30_000, wait: 30_000 });
    await expect.poll(() => redis.raw.zcard(`${prefix}{pool}:sem:queue`), { timeout: 2000, interval: 5 }).toBe(1);
    const giveUp = new AbortController();
    const quitting = quick.semaphore('pool', { limit: 1 }).acquire({ wait: 30_000, signal: giveUp.signal });
    await expect.poll(() => redis.raw.zcard(`${prefix}{pool}:sem:queue`), { timeout: 2000, interval: 5 }).toBe(2);
    giveUp.abort(new Error('gave up'));
    await expect(quitting).rejects.toThrow('gave up');
    for (const key of [`${prefix}{pool}:sem:queue`, `${prefix}{pool}:sem:alive`]) {
      expect(await redis.raw.pttl(key)).toBeGreaterThan(30_000);
    }
    await held.release();
    await (await queued).release();
  });
});
