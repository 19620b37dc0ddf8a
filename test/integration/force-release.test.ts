/**
 * A lease broken by an operator (Locks.forceRelease, `latchkey release --force`) is told so: on one
 * Redis the forced release leaves a short-lived note for the broken token (mark-forced.lua), and
 * the holder's extend or release that finds its lock gone or taken reads it (forced-token.lua).
 */
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { describe, expect, it } from 'vitest';
import { createLocks, LeaseLostError, type Locks } from '../../src/index.js';
import { uniquePrefix, useRedisServer } from '../helpers/harness.js';

const redis = useRedisServer();

type Driver = 'ioredis' | 'node-redis';

async function manager(driver: Driver, prefix: string): Promise<Locks> {
  if (driver === 'ioredis') {
    const client = new Redis(redis.server.port, '127.0.0.1');
    const locks = createLocks({ prefix, redis: client });
    redis.cleanup.push(async () => {
      await locks.close();
      client.disconnect();
    });
    return locks;
  }
  const client = createClient({ url: `redis://127.0.0.1:${redis.server.port}` });
  client.on('error', () => {});
  await client.connect();
  const locks = createLocks({ prefix, redis: client });
  redis.cleanup.push(async () => {
    await locks.close();
    client.destroy();
  });
  return locks;
}

async function lossOf(run: Promise<unknown>): Promise<LeaseLostError> {
  const error = await run.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(LeaseLostError);
  return error as LeaseLostError;
}

describe.each<Driver>(['ioredis', 'node-redis'])('a forced release through %s', (driver) => {
  it('is reported to the holder as forced, at its next extend, not as an expiry or a deletion', async () => {
    const prefix = uniquePrefix();
    const [holder, operator] = [await manager(driver, prefix), await manager(driver, prefix)];
    const lease = await holder.acquire('stuck', { ttl: 60_000 });
    expect(await operator.forceRelease('stuck')).toMatchObject({ held: true });
    const lost = await lossOf(lease.extend());
    expect(lost.reason).toBe('forced');
    expect(lost.message).toMatch(/is lost: an operator force-released it \(Locks.forceRelease or `latchkey release --force`\)/);
    expect((lease.signal.reason as LeaseLostError).reason).toBe('forced');
    // The note lives no longer than the broken lease would have, plus a few seconds.
    const left = await redis.raw.pttl(`${prefix}{stuck}:forced`);
    expect(left).toBeGreaterThan(0);
    expect(left).toBeLessThanOrEqual(65_000);
  });

  it('is reported as forced at the holder\'s release when the lock went to a waiter meanwhile', async () => {
    const prefix = uniquePrefix();
    const [holder, waiter, operator] = [await manager(driver, prefix), await manager(driver, prefix), await manager(driver, prefix)];
    const lease = await holder.acquire('handed', { ttl: 60_000 });
    const waiting = waiter.acquire('handed', { wait: 30_000 });
    while ((await redis.raw.zcard(`${prefix}{handed}:queue`)) === 0) await new Promise((r) => setTimeout(r, 10));
    await operator.forceRelease('handed');
    const next = await waiting;
    expect((await lossOf(lease.release())).reason).toBe('forced');
    await next.release();
  });

  it('leaves other losses as they were: a lock key deleted by hand is still "gone"', async () => {
    const prefix = uniquePrefix();
    const locks = await manager(driver, prefix);
    const lease = await locks.acquire('deleted', { ttl: 60_000 });
    await redis.raw.del(`${prefix}{deleted}`);
    expect((await lossOf(lease.extend())).reason).toBe('gone');
    // A note for another token does not count either.
    const other = await locks.acquire('deleted', { ttl: 60_000 });
    await redis.raw.set(`${prefix}{deleted}:forced`, 'not-its-token', 'PX', 60_000);
    await redis.raw.del(`${prefix}{deleted}`);
    expect((await lossOf(other.release())).reason).toBe('gone');
  });
});
