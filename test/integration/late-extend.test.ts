/**
 * An extend that succeeds in Redis after its lease already counts as lost (its validity ran out
 * before the reply came, or its expiry was declared meanwhile): the key then holds our token for
 * a whole new TTL while no lease of ours is held. The lease must give it back.
 *
 * `CLIENT PAUSE` holds the extend until the lease's validity has run out but before its key
 * expires in Redis. (A pause longer than the whole TTL would not do: when it ends, Redis runs the
 * extend against an expiry time already past, and the extend finds the key gone.) The managers
 * use `driftFactor: 0.5`, so that validity ends half a TTL before the key's expiry: a window the
 * pause's end lands in every time.
 */
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { describe, expect, it } from 'vitest';
import { createLocks, type Locks, type LocksOptions, type RenewFailedEvent } from '../../src/index.js';
import { lockKeys } from '../../src/keys.js';
import { aborted } from '../contract/lock-contract.js';
import { uniquePrefix, useRedisServer } from '../helpers/harness.js';

const redis = useRedisServer();

type Driver = 'ioredis' | 'node-redis';

async function managerOn(driver: Driver, settings: Omit<LocksOptions, 'redis'>): Promise<Locks> {
  if (driver === 'ioredis') {
    const client = new Redis(redis.server.port, '127.0.0.1');
    const locks = createLocks({ ...settings, redis: client });
    redis.cleanup.push(async () => {
      await locks.close();
      client.disconnect();
    });
    return locks;
  }
  const client = createClient({ url: redis.server.url });
  client.on('error', () => {});
  await client.connect();
  const locks = createLocks({ ...settings, redis: client });
  redis.cleanup.push(async () => {
    await locks.close();
    client.destroy();
  });
  return locks;
}

/**
 * Resolves once `key` is gone; fails after 2 s. The give-back runs when Redis answers the late
 * extend, after the pause: there is no event of ours to await for that, so the server is asked.
 */
async function keyGone(key: string): Promise<void> {
  const until = performance.now() + 2000;
  while ((await redis.raw.exists(key)) !== 0) {
    if (performance.now() > until) throw new Error(`${key} still exists 2 s after the pause`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** TTL of the leases, ms: their validity ends ~298 ms after the acquire was sent, their key expires >= 600 ms after. */
const TTL = 600;
/** The pause, ms: it ends past the validity of a lease acquired (or renewed) just before it began, and before its key's expiry. */
const PAUSE = 400;

describe.each<Driver>(['ioredis', 'node-redis'])('an extend that succeeds in Redis after the lease counts as lost (%s)', (driver) => {
  it('a manual extend whose reply comes after the validity ran out rejects with LeaseLostError and gives the key back', async () => {
    const prefix = uniquePrefix();
    const locks = await managerOn(driver, { prefix, driftFactor: 0.5 });
    const lease = await locks.acquire('late-reply', { ttl: TTL });
    await redis.raw.call('CLIENT', 'PAUSE', String(PAUSE), 'ALL');
    const error = await lease.extend().catch((e: unknown) => e); // sent in time, run by Redis after the pause
    // Not waited for past the validity (issue 18): the lease is lost as unreachable, at once.
    expect(error).toMatchObject({ code: 'LEASE_LOST', reason: 'unreachable', key: 'late-reply' });
    expect(lease.state).toBe('lost');
    // Extended in Redis when the pause ends, then deleted with our token.
    await keyGone(lockKeys(prefix, 'late-reply').lock);
    const other = await managerOn(driver, { prefix });
    const next = await other.tryAcquire('late-reply');
    expect(next).not.toBeNull();
    await next!.release();
  });

  it('a watchdog renewal whose reply comes after the lease was lost gives the key back', async () => {
    const prefix = uniquePrefix();
    let renewFailed!: (event: RenewFailedEvent) => void;
    const failed = new Promise<RenewFailedEvent>((resolve) => (renewFailed = resolve));
    const locks = await managerOn(driver, { prefix, driftFactor: 0.5, hooks: { renewFailed } });
    const lease = await locks.acquire('late-renewal', { ttl: TTL, renew: { every: 50 } });
    await redis.raw.call('CLIENT', 'PAUSE', String(PAUSE), 'ALL');
    // The renewal sent during the pause is still waiting when the validity runs out.
    expect(await aborted(lease.signal)).toMatchObject({ code: 'LEASE_LOST', reason: 'unreachable' });
    // Redis runs it when the pause ends: it succeeds there, and the lease, lost, gives the key back.
    const event = await failed;
    expect(event.error).toBe(lease.lostError);
    await keyGone(lockKeys(prefix, 'late-renewal').lock);
  });
});
