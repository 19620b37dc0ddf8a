/**
 * A single Redis server that fails: data loss (fencing tokens stay greater), slow replies (validity
 * counted on the monotonic clock), and a crashed holder process.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import { describe, expect, it, vi } from 'vitest';
import { createLocks, LeaseLostError } from '../../src/index.js';
import { rawClient, uniquePrefix, useRedisServer } from '../helpers/fixtures.js';
import { RedisServer } from '../helpers/redis-server.js';
import { managersClosedBy } from '../helpers/single-redis-managers.js';

const redis = useRedisServer();
const managerOn = managersClosedBy(redis.cleanup);

describe('fencing tokens when Redis loses data', () => {
  it('stay greater after a restart without persistence (the counter is gone)', async () => {
    const volatile = await RedisServer.start();
    try {
      const prefix = uniquePrefix();
      const client = new Redis(volatile.port, '127.0.0.1');
      client.on('error', () => {}); // the restart drops the connection; ioredis reconnects
      const locks = createLocks({ redis: client, prefix });
      // Another manager (another process, in effect): one manager queues its own callers behind its lease.
      const later = createLocks({ redis: client, prefix });
      const before = await locks.acquire('survive', { ttl: 60_000 });
      await volatile.restart();
      const check = new Redis(volatile.port, '127.0.0.1');
      expect(await check.exists(`${prefix}{survive}`, `${prefix}{survive}:fence`)).toBe(0); // data really lost
      check.disconnect();
      const after = await later.acquire('survive', { ttl: 60_000 });
      expect(after.fence).toBeGreaterThan(before.fence);
      await after.release();
      await expect(before.release()).rejects.toBeInstanceOf(LeaseLostError);
      await locks.close();
      await later.close();
      client.disconnect();
    } finally {
      await volatile.stop();
    }
  });

  it('stay greater when the counter is older than the last fence (a failover to a replica that had not seen it)', async () => {
    const prefix = uniquePrefix();
    const locks = await managerOn('ioredis', redis.server.port, { prefix });
    const first = await locks.acquire('failover');
    await first.release();
    const second = await locks.acquire('failover');
    await second.release();
    // The replica saw only the first acquisition's counter.
    await redis.raw.set(`${prefix}{failover}:fence`, String(first.fence));
    const third = await locks.acquire('failover');
    expect(third.fence).toBeGreaterThan(second.fence);
    await redis.raw.set(`${prefix}{failover}:fence`, '1');
    await third.release();
    const fourth = await locks.acquire('failover');
    expect(fourth.fence).toBeGreaterThan(third.fence);
    await fourth.release();
  });

  it('start from the server clock in microseconds rather than from 1', async () => {
    const prefix = uniquePrefix();
    const locks = await managerOn('ioredis', redis.server.port, { prefix });
    const [seconds, micros] = await redis.raw.time();
    const lease = await locks.acquire('clock');
    expect(lease.fence).toBeGreaterThanOrEqual(Number(seconds) * 1e6 + Number(micros));
    await lease.release();
  });
});

describe('validity on the monotonic clock', () => {
  // The manager's own connection is slowed: DEBUG SLEEP sent on it first, so that the server
  // blocks before it reads the acquire, which the connection carries after it.
  it('a slow reply shortens the lease instead of lengthening it', async () => {
    const client = rawClient(redis.server);
    const locks = createLocks({ redis: client, prefix: uniquePrefix() });
    const sleeping = client.call('DEBUG', 'SLEEP', '0.3');
    const lease = await locks.acquire('slow', { ttl: 1000 });
    await sleeping;
    // Counted from when the acquire was sent: at least the 280 ms the reply waited are gone.
    expect(lease.timeLeft()).toBeLessThan(1000 - 280);
    await lease.release();
    await locks.close();
    client.disconnect();
  });

  it('a reply slower than the TTL hands out no lease and frees the lock', async () => {
    const prefix = uniquePrefix();
    const client = rawClient(redis.server);
    const locks = createLocks({ redis: client, prefix });
    const sleeping = client.call('DEBUG', 'SLEEP', '0.2');
    expect(await locks.tryAcquire('too-slow', { ttl: 100 })).toBeNull();
    await sleeping;
    await locks.close();
    client.disconnect();
    expect(await redis.raw.exists(`${prefix}{too-slow}`)).toBe(0);
  });

  it('does not read the wall clock: a jump of Date.now() changes nothing', async () => {
    const prefix = uniquePrefix();
    const locks = await managerOn('ioredis', redis.server.port, { prefix });
    const spy = vi.spyOn(Date, 'now').mockReturnValue(Date.UTC(2001, 0, 1));
    try {
      const lease = await locks.acquire('wall', { ttl: 2000 });
      expect(lease.timeLeft()).toBeGreaterThan(1900);
      await lease.release();
    } finally {
      spy.mockRestore();
    }
  });
});

describe('a holder process that crashes', () => {
  it('loses its lock by the TTL: the next waiter gets it, though no release was ever published', async () => {
    const prefix = uniquePrefix();
    const ttl = 500;
    const child = spawn(process.execPath, [new URL('../helpers/holder-process.mjs', import.meta.url).pathname, redis.server.url, prefix, 'crash', String(ttl)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const [line] = (await once(createInterface({ input: child.stdout! }), 'line')) as [string];
    const crashedFence = Number(line.split(' ')[1]);
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
    const locks = await managerOn('ioredis', redis.server.port, { prefix });
    const started = performance.now();
    const lease = await locks.acquire('crash', { wait: 5000 });
    expect(performance.now() - started).toBeLessThan(ttl + 250);
    expect(lease.fence).toBeGreaterThan(crashedFence);
    await lease.release();
  });
});
