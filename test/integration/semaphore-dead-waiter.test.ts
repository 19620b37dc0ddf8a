/**
 * A semaphore's wake-ups pass over a queued waiter whose process is gone (nobody listens on its
 * inbox: PUBLISH says so), as a release's does: the wake-up of a waiter that leaves the head of the
 * queue, and the one an acquire sends when it leaves permits over. Before, both went to the dead
 * entry and nobody else, and the live waiters behind it slept until their recheck, which found the
 * dead entry still ahead of them (it lived until its deadline, 3 × its manager's recheck).
 *
 * The dead process's entry is what one leaves: written here as semaphore-acquire.lua writes it, on
 * an inbox channel no connection listens on.
 */
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import type { Locks } from '../../src/index.js';
import { managerOver, uniquePrefix, useRedisServer } from '../helpers/harness.js';

const redis = useRedisServer();
const RECHECK = 20_000; // no waiter looks again by itself within the test: only a wake-up moves it

function manager(prefix: string): Locks {
  const client = new Redis(redis.server.port, '127.0.0.1');
  return managerOver(redis.cleanup, [client], { prefix, recheck: RECHECK, redis: client });
}

/** Queues a dead process's waiter right behind the last one: an entry alive for 60 s, on an inbox nobody hears. */
async function queueDeadWaiter(prefix: string, name: string): Promise<void> {
  const queue = `${prefix}{${name}}:sem:queue`;
  const [, last] = await redis.raw.zrange(queue, '-1', '-1', 'WITHSCORES');
  const [seconds] = await redis.raw.time();
  await redis.raw.zadd(queue, Number(last) + 1, 'deadbeef:1');
  await redis.raw.hset(`${prefix}{${name}}:sem:alive`, 'deadbeef:1', String(Number(seconds) * 1000 + 60_000));
}

/** `promise`'s value, or null if it takes more than `ms`. */
async function within<T>(promise: Promise<T>, ms: number): Promise<T | null> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), ms)));
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

const queued = (prefix: string, name: string): Promise<number> => redis.raw.zcard(`${prefix}{${name}}:sem:queue`);

describe("a semaphore's wake-ups and a dead waiter", () => {
  it('a waiter that leaves the head of the queue wakes the live one behind the dead one', async () => {
    const prefix = uniquePrefix();
    const [a, b, c] = [manager(prefix), manager(prefix), manager(prefix)];
    const held = await a.semaphore('pool', { limit: 2 }).acquire({ ttl: 30_000 });
    const controller = new AbortController();
    const big = b.semaphore('pool', { limit: 2 }).acquire({ permits: 2, ttl: 30_000, wait: 30_000, signal: controller.signal });
    await expect.poll(() => queued(prefix, 'pool'), { timeout: 2000, interval: 5 }).toBe(1);
    await queueDeadWaiter(prefix, 'pool');
    const small = c.semaphore('pool', { limit: 2 }).acquire({ ttl: 30_000, wait: 30_000 });
    await expect.poll(() => queued(prefix, 'pool'), { timeout: 2000, interval: 5 }).toBe(3);
    controller.abort(new Error('gave up'));
    await expect(big).rejects.toThrow('gave up');
    // A permit is free, and the live waiter gets it now, not at its recheck (20 s) or the dead entry's deadline (60 s).
    const lease = await within(small, 3000);
    expect(lease).not.toBeNull();
    await lease!.release();
    await held.release();
  });

  it('an acquire that leaves permits over wakes the live waiter behind the dead one', async () => {
    const prefix = uniquePrefix();
    const [a, b, c] = [manager(prefix), manager(prefix), manager(prefix)];
    const held = await a.semaphore('pool', { limit: 3 }).acquire({ permits: 2, ttl: 30_000 });
    const big = b.semaphore('pool', { limit: 3 }).acquire({ permits: 2, ttl: 30_000, wait: 30_000 });
    await expect.poll(() => queued(prefix, 'pool'), { timeout: 2000, interval: 5 }).toBe(1);
    await queueDeadWaiter(prefix, 'pool');
    const small = c.semaphore('pool', { limit: 3 }).acquire({ ttl: 30_000, wait: 30_000 });
    await expect.poll(() => queued(prefix, 'pool'), { timeout: 2000, interval: 5 }).toBe(3);
    await held.release(); // the release wakes `big`, whose acquire leaves one permit over
    const bigLease = await big;
    const lease = await within(small, 3000);
    expect(lease).not.toBeNull();
    await lease!.release();
    await bigLease.release();
  });
});
