/**
 * An attempt that the client's own timeout ends after its waiter has left (docs/safety.md, "When
 * the client's own timeout ends an attempt"): Redis is paused, the wait ends on latchkey's clock
 * with an UnreachableError, then ioredis's `commandTimeout` fails the attempt still in the
 * connection. Resumed, Redis runs that attempt, which takes the lock or the permits; the give-back
 * sent at the timeout, behind it on the same connection, frees them at once (before, nothing was
 * given back: the exit had run before the timeout, and a timed-out attempt of a wait that goes on
 * is never given back, so the lock stayed taken until its TTL).
 */
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { UnreachableError, type Locks } from '../../src/index.js';
import { managerOver, uniquePrefix, useRedisServer } from '../helpers/harness.js';
import { RedisServer } from '../helpers/redis-server.js';

const redis = useRedisServer();
const COMMAND_TIMEOUT = 400;
const WAIT = 100; // the wait ends about 250 ms after its attempt was sent (the grace of an attempt in flight): before the timeout

let paused: RedisServer | undefined;
afterEach(async () => {
  await paused?.stop();
  paused = undefined;
});

async function pausedManager(): Promise<{ locks: Locks; raw: Redis; prefix: string }> {
  paused = await RedisServer.start();
  const prefix = uniquePrefix();
  const client = new Redis(paused.port, '127.0.0.1', { commandTimeout: COMMAND_TIMEOUT });
  const raw = new Redis(paused.port, '127.0.0.1');
  redis.cleanup.push(() => raw.quit());
  const locks = managerOver(redis.cleanup, [client], { prefix, redis: client });
  return { locks, raw, prefix };
}

/** Ends when the client's timeout has failed every command sent before now (plus a margin). */
const pastTheTimeout = (from: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, Math.max(0, from + COMMAND_TIMEOUT + 100 - performance.now())));

describe('an attempt the client times out after its waiter left', () => {
  it('a lock: the late attempt runs when Redis resumes, and its lock is given back at once', async () => {
    const { locks, raw, prefix } = await pausedManager();
    await (await locks.acquire('late', { ttl: 30_000 })).release(); // scripts loaded, connection up
    const fenceBefore = Number(await raw.get(`${prefix}{late}:fence`));
    paused!.pause();
    const sent = performance.now();
    const error = await locks.acquire('late', { ttl: 30_000, wait: WAIT }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UnreachableError);
    expect(performance.now() - sent).toBeLessThan(COMMAND_TIMEOUT); // ended on latchkey's clock, first
    await pastTheTimeout(sent);
    paused!.resume();
    // It does run (a new fence), and its lock goes with the give-back, not with its 30 s TTL.
    await expect.poll(async () => Number(await raw.get(`${prefix}{late}:fence`)), { timeout: 2000, interval: 10 }).toBeGreaterThan(fenceBefore);
    await expect.poll(() => raw.exists(`${prefix}{late}`), { timeout: 2000, interval: 10 }).toBe(0);
  });

  it('a semaphore: the late attempt takes a permit when Redis resumes, and it is given back at once', async () => {
    const { locks, raw, prefix } = await pausedManager();
    const pool = locks.semaphore('pool', { limit: 1 });
    await (await pool.acquire({ ttl: 30_000 })).release();
    const fenceBefore = Number(await raw.get(`${prefix}{pool}:sem:fence`));
    paused!.pause();
    const sent = performance.now();
    const error = await pool.acquire({ ttl: 30_000, wait: WAIT }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UnreachableError);
    expect(performance.now() - sent).toBeLessThan(COMMAND_TIMEOUT);
    await pastTheTimeout(sent);
    paused!.resume();
    await expect.poll(async () => Number(await raw.get(`${prefix}{pool}:sem:fence`)), { timeout: 2000, interval: 10 }).toBeGreaterThan(fenceBefore);
    await expect.poll(() => raw.hget(`${prefix}{pool}:sem:permits`, '#used'), { timeout: 2000, interval: 10 }).toBe('0');
    const next = await pool.tryAcquire({ ttl: 1000 });
    expect(next).not.toBeNull();
    await next!.release();
  });
});
