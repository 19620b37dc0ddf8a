/** Every bad input gets an InvalidOptionError that names the option, what was expected and what was given. */
import { Cluster, Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { createSentinel } from 'redis';
import { createLocks, InvalidOptionError, MAX_TTL, UnsupportedError, type Locks } from '../../src/index.js';

async function invalid(run: () => unknown, option: string, mentions: RegExp): Promise<void> {
  let error: unknown;
  try {
    await run();
  } catch (e) {
    error = e;
  }
  expect(error).toBeInstanceOf(InvalidOptionError);
  expect(error).toMatchObject({ code: 'INVALID_OPTION', option, name: 'InvalidOptionError' });
  expect((error as Error).message).toMatch(mentions);
}

describe('createLocks options', () => {
  it('refuses a client that is not a Redis client', async () => {
    await invalid(() => createLocks({ redis: { get: () => 1 } as never }), 'redis', /ioredis or iovalkey client.*node-redis client.*Valkey GLIDE GlideClient or GlideClusterClient.*got an object/);
  });

  it('refuses a URL given as the client, pointing to `url`, without echoing it (it may hold a password)', async () => {
    await invalid(() => createLocks({ redis: 'redis://user:secret@localhost' as never }), 'redis', /use the "url" option instead.*got a string/);
    expect(() => createLocks({ redis: 'redis://user:secret@localhost' as never })).not.toThrow(/secret/);
  });

  it('refuses more than one backend, naming those given and the choices', async () => {
    const redis = new Redis({ lazyConnect: true });
    await invalid(
      () => createLocks({ redis, url: 'redis://x' }),
      'redis and url',
      /expected exactly one of "redis", "url", "redlock" or "memory".*got "redis" and "url" together/,
    );
    await invalid(() => createLocks({ redis, url: 'redis://x', redlock: [] }), 'redis and url and redlock', /got "redis", "url" and "redlock" together/);
    redis.disconnect();
  });

  it('refuses replica acknowledgement on a Cluster client, whose WAIT would reach any node', async () => {
    const cluster = new Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true });
    await invalid(() => createLocks({ redis: cluster, replication: { replicas: 1 } }), 'replication', /not a Cluster client.*Leave "replication" out on Cluster/);
    cluster.disconnect();
  });

  it('refuses a node-redis Sentinel client, saying why and what to give instead', () => {
    const sentinel = createSentinel({ name: 'mymaster', sentinelRootNodes: [{ host: '127.0.0.1', port: 1 }] }); // never connected
    expect(() => createLocks({ redis: sentinel as never })).toThrow(UnsupportedError);
    expect(() => createLocks({ redis: sentinel as never })).toThrow(/node-redis Sentinel client .*ioredis client with Sentinel options/);
  });

  it('refuses a URL that is not redis:// or rediss://', async () => {
    await invalid(() => createLocks({ url: 'http://localhost:6379' }), 'url', /redis:\/\/ or rediss:\/\//);
  });

  it('refuses a lock name that would make an empty hash tag, for every kind of lock', async () => {
    const locks = createLocks();
    await invalid(() => locks.acquire('}x'), 'key', /does not start with "\}"/);
    await invalid(() => locks.tryAcquire('}x'), 'key', /does not start with "\}"/);
    await invalid(() => locks.acquireAll(['a', '}x']), 'key', /does not start with "\}"/);
    await invalid(() => locks.semaphore('}x', { limit: 2 }), 'name', /does not start with "\}"/);
    await invalid(() => locks.readWriteLock('}x'), 'name', /does not start with "\}"/);
    await invalid(() => locks.fairLock('}x'), 'name', /does not start with "\}"/);
    // A resource of fencedWrite is the application's own key, not a lock's: any name goes.
    await expect(locks.fencedRead('}x')).resolves.toBeNull();
    await locks.close();
  });

  it('refuses a prefix with hash-tag braces', async () => {
    await invalid(() => createLocks({ prefix: 'app:{x}:' }), 'prefix', /without "\{" or "\}"/);
  });

  it('names unknown options, so a typo does not pass silently', async () => {
    await invalid(() => createLocks({ tll: 1000 } as never), 'options.tll', /one of the known options/);
  });

  it('refuses a bad default ttl, wait, strategy and driftFactor', async () => {
    await invalid(() => createLocks({ ttl: 0 }), 'ttl', /integer number of milliseconds/);
    await invalid(() => createLocks({ wait: -1 }), 'wait', /non-negative/);
    await invalid(() => createLocks({ strategy: 'spin' as never }), 'strategy', /"notify" or "backoff"/);
    await invalid(() => createLocks({ driftFactor: 2 }), 'driftFactor', /from 0 to 0.5/);
    await invalid(() => createLocks({ recheck: 0 }), 'recheck', /positive integer/);
  });
});

describe('acquire options', () => {
  const locks: Locks = createLocks();

  it('refuses an empty or non-string key', async () => {
    await invalid(() => locks.acquire(''), 'key', /non-empty string.*got ""/);
    await invalid(() => locks.acquire(42 as never), 'key', /got number 42/);
    await invalid(() => locks.tryAcquire(undefined as never), 'key', /got undefined/);
  });

  it('refuses a TTL that is not a positive integer within the timer limit', async () => {
    await invalid(() => locks.acquire('k', { ttl: 0 }), 'ttl', /from 10 to 2147483647.*got number 0/);
    await invalid(() => locks.acquire('k', { ttl: -5 }), 'ttl', /got number -5/);
    await invalid(() => locks.acquire('k', { ttl: 1.5 }), 'ttl', /got number 1.5/);
    await invalid(() => locks.acquire('k', { ttl: MAX_TTL + 1 }), 'ttl', /24.8 days/);
    await invalid(() => locks.acquire('k', { ttl: '1000' as never }), 'ttl', /got "1000"/);
    await invalid(() => locks.acquire('k', { ttl: Number.NaN }), 'ttl', /got number NaN/);
  });

  it('refuses a negative or fractional wait', async () => {
    await invalid(() => locks.acquire('k', { wait: -1 }), 'wait', /non-negative integer.*got number -1/);
    await invalid(() => locks.acquire('k', { wait: 0.5 }), 'wait', /got number 0.5/);
  });

  it('accepts wait: Infinity', async () => {
    const lease = await locks.acquire('inf', { wait: Infinity });
    await lease.release();
  });

  it('refuses a signal that is not an AbortSignal', async () => {
    await invalid(() => locks.acquire('k', { signal: {} as never }), 'signal', /AbortSignal/);
  });

  it('refuses bad renew options', async () => {
    await invalid(() => locks.acquire('k', { renew: 'yes' as never }), 'renew', /options object/);
    await invalid(() => locks.acquire('k', { renew: { every: 0 } }), 'renew.every', /milliseconds/);
    await invalid(() => locks.acquire('k', { renew: { often: 1 } as never }), 'renew.often', /known options/);
  });

  it('refuses a renewal interval that cannot renew before the lease expires, wherever renew options enter', async () => {
    // ttl 300 ms, driftFactor 0.01: the validity is 300 - (3 + 2) = 295 ms, so every must be below it.
    const range = /"renew.every".*from 10 to 294.*ttl 300 ms minus the 5 ms clock-drift allowance.*got number 1000/;
    await invalid(() => locks.acquire('k', { ttl: 300, renew: { every: 1000 } }), 'renew.every', range);
    await invalid(() => locks.acquire('k', { ttl: 300, renew: { every: 295 } }), 'renew.every', /from 10 to 294/);
    await invalid(() => locks.tryAcquire('k', { ttl: 300, renew: { every: 300 } }), 'renew.every', /from 10 to 294/);
    await invalid(() => locks.withLock('k', { ttl: 300, renew: { every: 1000 } }, () => 1), 'renew.every', range);
    await invalid(() => locks.acquireAll(['a', 'b'], { ttl: 300, renew: { every: 1000 } }), 'renew.every', range);
    await invalid(() => locks.withLocks(['a', 'b'], { ttl: 300, renew: { every: 1000 } }, () => 1), 'renew.every', range);
    await invalid(() => locks.semaphore('s', { limit: 2 }).acquire({ ttl: 300, renew: { every: 1000 } }), 'renew.every', range);
    await invalid(() => locks.semaphore('s', { limit: 2 }).withPermit({ ttl: 300, renew: { every: 1000 } }, () => 1), 'renew.every', range);
    await invalid(() => locks.readWriteLock('rw').withRead({ ttl: 300, renew: { every: 1000 } }, () => 1), 'renew.every', range);
    await invalid(() => locks.readWriteLock('rw').write({ ttl: 300, renew: { every: 1000 } }), 'renew.every', range);
    await invalid(() => locks.fairLock('f').withLock({ ttl: 300, renew: { every: 1000 } }, () => 1), 'renew.every', range);
    // The manager's default ttl counts when the call gives none.
    const short = createLocks({ ttl: 300 });
    await invalid(() => short.acquire('k', { renew: { every: 1000 } }), 'renew.every', range);
    await short.close();
    // A TTL too short for any interval says so.
    await invalid(() => locks.acquire('k', { ttl: 10, renew: { every: 10 } }), 'renew.every', /none fits: raise ttl/);
    // The largest interval that fits is accepted, and renews.
    const lease = await locks.acquire('fits', { ttl: 300, renew: { every: 294 } });
    await lease.release();
  });

  it('refuses lock names over 1024 bytes of UTF-8, for locks and the other primitives', async () => {
    await invalid(() => locks.acquire('x'.repeat(1025)), 'key', /at most 1024 bytes of UTF-8, got a string of 1025 bytes/);
    // 400 characters of 3 bytes each: 1200 bytes.
    await invalid(() => locks.acquire('€'.repeat(400)), 'key', /got a string of 1200 bytes/);
    await invalid(() => locks.acquire('x'.repeat(1 << 20)), 'key', /got a string of 1048576 bytes/);
    await invalid(() => locks.withLock('x'.repeat(1025), () => 1), 'key', /at most 1024 bytes/);
    await invalid(() => locks.acquireAll(['a', 'x'.repeat(1025)]), 'key', /at most 1024 bytes/);
    expect(() => locks.semaphore('x'.repeat(1025), { limit: 1 })).toThrow(/"name".*at most 1024 bytes/);
    expect(() => locks.readWriteLock('x'.repeat(1025))).toThrow(/"name".*at most 1024 bytes/);
    expect(() => locks.fairLock('x'.repeat(1025))).toThrow(/"name".*at most 1024 bytes/);
    const longest = await locks.acquire('x'.repeat(1024));
    expect(longest.key).toHaveLength(1024);
    await longest.release();
  });

  it('refuses a bad extend TTL', async () => {
    const lease = await locks.acquire('ext');
    await invalid(() => lease.extend(-1), 'ttl', /got number -1/);
    await lease.release();
  });

  it('refuses withLock without a function', async () => {
    await invalid(() => locks.withLock('k', {} as never), 'fn', /a function/);
  });

  it('refuses bad fenced writes', async () => {
    await invalid(() => locks.fencedWrite('', 'v', 1), 'resource', /non-empty string/);
    await invalid(() => locks.fencedWrite('r', { a: 1 } as never, 1), 'value', /JSON.stringify/);
    await invalid(() => locks.fencedWrite('r', 'v', 0), 'fence', /positive safe integer/);
  });

  it('refuses options that are not an object (null, a number) in every with* call, rather than spread them into nothing', async () => {
    const fn = (): number => 1;
    await invalid(() => locks.withLock('k', null as never, fn), 'options', /an options object/);
    await invalid(() => locks.withLock('k', 42 as never, fn), 'options', /an options object/);
    await invalid(() => locks.withLocks(['k'], null as never, fn), 'options', /an options object/);
    await invalid(() => locks.semaphore('s', { limit: 1 }).withPermit(null as never, fn), 'options', /an options object/);
    await invalid(() => locks.fairLock('f').withLock(null as never, fn), 'options', /an options object/);
    await invalid(() => locks.readWriteLock('rw').withRead(null as never, fn), 'options', /an options object/);
  });

  it('rejects bad options of semaphore and fair-lock calls (a rejected promise, never a synchronous throw)', async () => {
    const sem = locks.semaphore('s', { limit: 2 });
    const fair = locks.fairLock('f');
    const calls: Array<[() => Promise<unknown>, string, RegExp]> = [
      [() => sem.acquire({ bogus: 1 } as never), 'options.bogus', /known options/],
      [() => sem.tryAcquire({ permits: 0 }), 'permits', /positive integer number of permits/],
      [() => fair.acquire({ bogus: 1 } as never), 'options.bogus', /known options/],
      [() => fair.tryAcquire({ bogus: 1 } as never), 'options.bogus', /known options/],
    ];
    for (const [call, option, message] of calls) {
      let result: Promise<unknown> | undefined;
      expect(() => (result = call())).not.toThrow();
      await invalid(() => result!, option, message);
    }
  });

  it('refuses reentrant on a fair lock, naming only the options a fair lock takes', async () => {
    const fair = locks.fairLock('f');
    await invalid(() => fair.acquire({ reentrant: false } as never), 'options.reentrant', /known options \(ttl, wait, signal, strategy, renew\)/);
  });
});
