/**
 * What is specific to a single Redis server: the script cache, data loss, WRONGTYPE, slow replies,
 * a crashed holder process, the borrowed client, and the seeds' traps that only a real server shows.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { describe, expect, it, vi } from 'vitest';
import { BackendError, createLocks, LeaseLostError, WrongTypeError, type Locks } from '../../src/index.js';
import { adaptClient } from '../../src/client/detect.js';
import { lockKeys } from '../../src/keys.js';
import { runScript } from '../../src/lua/run-script.js';
import { acquireScript, extendScript, releaseScript } from '../../src/lua/scripts.generated.js';
import { rawClient, uniquePrefix, useRedisServer } from '../helpers/harness.js';
import { RedisServer } from '../helpers/redis-server.js';

const redis = useRedisServer();
const cleanup = redis.cleanup;

type Driver = 'ioredis' | 'node-redis';

async function managerOn(driver: Driver, port: number, settings: { prefix: string; recheck?: number; holder?: string }): Promise<Locks> {
  if (driver === 'ioredis') {
    const client = new Redis(port, '127.0.0.1');
    const locks = createLocks({ ...settings, redis: client });
    cleanup.push(async () => {
      await locks.close();
      client.disconnect();
    });
    return locks;
  }
  const client = createClient({ url: `redis://127.0.0.1:${port}` });
  client.on('error', () => {});
  await client.connect();
  const locks = createLocks({ ...settings, redis: client });
  cleanup.push(async () => {
    await locks.close();
    client.destroy();
  });
  return locks;
}

describe.each<Driver>(['ioredis', 'node-redis'])('single Redis through %s', (driver) => {
  it('runs its scripts again after the script cache is flushed (EVALSHA falls back to EVAL on NOSCRIPT)', async () => {
    const prefix = uniquePrefix();
    const locks = await managerOn(driver, redis.server.port, { prefix });
    const first = await locks.acquire('cache');
    await redis.raw.script('FLUSH');
    await first.extend();
    await first.release();
    await redis.raw.script('FLUSH');
    const second = await locks.acquire('cache');
    expect(second.fence).toBeGreaterThan(first.fence);
    await redis.raw.script('FLUSH');
    await second.release();
  });

  it('a release that grants the lock to a waiter of another manager: the new holder is named at once, nothing per lease to clean up', async () => {
    const prefix = uniquePrefix();
    const [first, other] = [await managerOn(driver, redis.server.port, { prefix, holder: 'worker-1' }), await managerOn(driver, redis.server.port, { prefix, holder: 'worker-2' })];
    const keys = lockKeys(prefix, 'described');
    const lease = await first.acquire('described', { ttl: 10_000 });
    expect((await other.inspect('described')).holder?.who).toBe('worker-1');
    const waiting = other.acquire('described', { wait: 10_000 });
    await expect.poll(() => redis.raw.zcard(keys.queue), { timeout: 2000, interval: 5 }).toBe(1);
    await lease.release();
    const next = await waiting;
    expect(await redis.raw.get(keys.lock)).toBe(next.token);
    expect((await first.inspect('described')).holder?.who).toBe('worker-2');
    expect(await redis.raw.exists(keys.holder)).toBe(0); // no per-lease record, ever
    await next.release();
  });

  it('loads release and extend again when acquire finds the script cache flushed, so that they need no EVAL of their own', async () => {
    const locks = await managerOn(driver, redis.server.port, { prefix: uniquePrefix() });
    await (await locks.acquire('recache-warm-up')).release();
    await redis.raw.script('FLUSH');
    const evals = async (): Promise<number> => Number(/cmdstat_eval:calls=(\d+)/.exec(await redis.raw.info('commandstats'))?.[1] ?? 0);
    const before = await evals();
    const lease = await locks.acquire('recache'); // NOSCRIPT, then EVAL: one
    await expect.poll(async () => redis.raw.script('EXISTS', releaseScript.sha, extendScript.sha), { timeout: 2000, interval: 10 }).toEqual([1, 1]);
    await lease.extend();
    await lease.release();
    expect(await evals()).toBe(before + 1);
  });

  it('acquires with the expiry set in the same step (no SETNX-then-EXPIRE window) and namespaced keys sharing a hash tag', async () => {
    const prefix = uniquePrefix();
    const locks = await managerOn(driver, redis.server.port, { prefix });
    const lease = await locks.acquire('orders:42', { ttl: 3000 });
    const pttl = await redis.raw.pttl(`${prefix}{orders:42}`);
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(3000);
    expect(await redis.raw.get(`${prefix}{orders:42}`)).toBe(lease.token);
    expect(Number(await redis.raw.get(`${prefix}{orders:42}:fence`))).toBe(lease.fence);
    expect((await redis.raw.keys(`${prefix}{*`)).sort()).toEqual([`${prefix}{orders:42}`, `${prefix}{orders:42}:fence`]);
    // Besides the lock's keys, one per manager: who it is, under the tag its tokens start with.
    await expect.poll(() => redis.raw.keys(`${prefix}holder:*`), { timeout: 2000, interval: 5 }).toEqual([`${prefix}holder:${lease.token.slice(0, 8)}`]);
    await lease.release();
    expect(await redis.raw.exists(`${prefix}{orders:42}`)).toBe(0);
  });

  it('reports WRONGTYPE on the lock key as a WrongTypeError with the Redis error as cause', async () => {
    const prefix = uniquePrefix();
    const locks = await managerOn(driver, redis.server.port, { prefix });
    await redis.raw.hset(`${prefix}{clash}`, 'field', 'value');
    const error = await locks.acquire('clash').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WrongTypeError);
    expect(error).toMatchObject({ code: 'WRONG_TYPE', key: `${prefix}{clash}` });
    expect(String((error as Error).cause)).toMatch(/WRONGTYPE/);
  });

  it('reports WRONGTYPE on the fence key and leaves no lock behind', async () => {
    const prefix = uniquePrefix();
    const locks = await managerOn(driver, redis.server.port, { prefix });
    await redis.raw.lpush(`${prefix}{fence-clash}:fence`, 'x');
    await expect(locks.acquire('fence-clash')).rejects.toMatchObject({ code: 'WRONG_TYPE' });
    expect(await redis.raw.exists(`${prefix}{fence-clash}`)).toBe(0);
  });

  it('issues a fence above a counter that is ahead of the server clock, and keeps the counter at it', async () => {
    const prefix = uniquePrefix();
    const locks = await managerOn(driver, redis.server.port, { prefix });
    const ahead = Date.now() * 1000 + 10 ** 12; // fences issued by a server whose clock ran ahead
    await redis.raw.set(`${prefix}{ahead}:fence`, String(ahead));
    const first = await locks.acquire('ahead');
    expect(first.fence).toBe(ahead + 1);
    expect(await redis.raw.get(`${prefix}{ahead}:fence`)).toBe(String(ahead + 1));
    expect(await redis.raw.pttl(`${prefix}{ahead}:fence`)).toBeGreaterThan(0);
    await first.release();
    const second = await locks.acquire('ahead');
    expect(second.fence).toBe(ahead + 2);
    await second.release();
  });
});

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

describe('the acquire script', () => {
  it('is idempotent for one token: a replayed acquire returns the same fence and does not fail', async () => {
    const prefix = uniquePrefix();
    const keys = lockKeys(prefix, 'replay');
    const client = adaptClient(redis.raw);
    // Not queuing: the lock and fence keys only; token and ttl (no floor: a single Redis).
    const all = [keys.lock, keys.fence];
    const first = await runScript(client, acquireScript, all, ['token-a', '5000']);
    const replay = await runScript(client, acquireScript, all, ['token-a', '5000']);
    const other = await runScript(client, acquireScript, all, ['token-b', '5000']);
    expect(replay).toEqual(first);
    expect((other as number[])[0]).toBe(0);
    expect((other as number[])[1]).toBeGreaterThan(4000);
    // A counter that expired or was evicted during the hold: the replay issues a new, greater fence.
    await redis.raw.del(keys.fence);
    const afterLoss = await runScript(client, acquireScript, all, ['token-a', '5000']);
    expect(typeof first).toBe('number'); // acquired: the fence alone
    expect(afterLoss).toBeGreaterThan(first as number);
  });

  it("with a Redlock floor issues max(last fence + 1, floor), a floor above the server's clock counting as none, and the server's clock when there is no counter", async () => {
    const prefix = uniquePrefix();
    const keys = lockKeys(prefix, 'floor');
    const client = adaptClient(redis.raw);
    const all = [keys.lock, keys.fence];
    const serverNow = async (): Promise<number> => {
      const [seconds, micros] = await redis.raw.time();
      return Number(seconds) * 1e6 + Number(micros);
    };
    /** Takes and releases the lock with `floor` (the counter stays), checking the bound every fence keeps. */
    const take = async (token: string, floor: number): Promise<number> => {
      const last = Number((await redis.raw.get(keys.fence)) ?? 0);
      const fence = (await runScript(client, acquireScript, all, [token, '5000', String(floor)])) as number;
      await redis.raw.del(keys.lock);
      expect(Number(await redis.raw.get(keys.fence))).toBe(fence); // the counter is at the fence
      expect(fence).toBeLessThanOrEqual(Math.max(last + 1, await serverNow())); // never above max(last + 1, TIME)
      return fence;
    };
    const hour = 3_600_000_000;
    // No counter: the server's clock, whether the floor is behind it or an hour ahead of it.
    const before = await serverNow();
    const fromClock = await take('t1', 1);
    expect(fromClock).toBeGreaterThanOrEqual(before);
    await redis.raw.del(keys.fence);
    expect(await take('t2', (await serverNow()) + hour)).toBeLessThan(before + hour);
    // A counter, a floor at or behind it (0: no guess): the counter + 1.
    const counter = (await serverNow()) - 10_000_000; // ten seconds behind the clock
    await redis.raw.set(keys.fence, String(counter));
    expect(await take('t3', 0)).toBe(counter + 1);
    expect(await take('t4', counter)).toBe(counter + 2);
    // The floor that guesses right (the counter + 1): the floor.
    expect(await take('t5', counter + 3)).toBe(counter + 3);
    // A floor ahead of the counter and behind the server's clock: the floor.
    const ahead = counter + 5_000_000;
    expect(await take('t6', ahead)).toBe(ahead);
    // A floor ahead of the server's clock (a caller's clock an hour fast): not honoured, the counter + 1.
    expect(await take('t7', (await serverNow()) + hour)).toBe(ahead + 1);
    // A replayed acquire whose counter was lost during the hold: the server's clock, not the floor.
    await runScript(client, acquireScript, all, ['t8', '5000', '0']);
    await redis.raw.del(keys.fence);
    const replayedAt = await serverNow();
    const replayed = (await runScript(client, acquireScript, all, ['t8', '5000', String(replayedAt + hour)])) as number;
    expect(replayed).toBeGreaterThanOrEqual(replayedAt);
    expect(replayed).toBeLessThanOrEqual(await serverNow());
  });

  it('on a Redlock node, a free acquire whose floor is the counter + 1 makes two calls and reads no clock', async () => {
    // A server of its own, so that no other connection's commands are counted.
    const server = await RedisServer.start();
    const raw = rawClient(server);
    try {
      const keys = lockKeys(uniquePrefix(), 'two-calls');
      const client = adaptClient(raw);
      const all = [keys.lock, keys.fence];
      const counter = 1_700_000_000_000_000;
      await raw.set(keys.fence, String(counter));
      /** Calls of each command so far, scripts' inner calls included (INFO commandstats). */
      const calls = async (): Promise<Record<string, number>> => {
        const stats = await raw.info('commandstats');
        return Object.fromEntries([...stats.matchAll(/cmdstat_(\w+):calls=(\d+)/g)].map((m) => [m[1]!, Number(m[2])]));
      };
      // The script is loaded by a first call, so that what is counted is one call alone.
      expect(await runScript(client, acquireScript, all, ['t1', '5000', String(counter + 1)])).toBe(counter + 1);
      await raw.del(keys.lock);
      const before = await calls();
      expect(await runScript(client, acquireScript, all, ['t2', '5000', String(counter + 2)])).toBe(counter + 2);
      const after = await calls();
      const delta = (command: string): number => (after[command] ?? 0) - (before[command] ?? 0);
      expect(delta('set')).toBe(2); // SET lock NX PX, SET counter PX GET
      expect(delta('time')).toBe(0);
      expect(delta('get')).toBe(0);
    } finally {
      raw.disconnect();
      await server.stop();
    }
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

describe('the borrowed client', () => {
  it('is used but not modified: no commands defined, no listeners added, still open after close()', async () => {
    const client = new Redis(redis.server.port, '127.0.0.1');
    await client.ping();
    const keysBefore = Object.keys(client).sort();
    const listenersBefore = client.eventNames().map((e) => [e, client.listenerCount(e)]);
    const locks = createLocks({ redis: client, prefix: uniquePrefix() });
    const holder = await locks.acquire('borrowed');
    const waiting = locks.acquire('borrowed', { wait: 5000 });
    await new Promise((r) => setTimeout(r, 20));
    await holder.release();
    await (await waiting).release();
    await locks.close();
    expect(Object.keys(client).sort()).toEqual(keysBefore);
    expect(client.eventNames().map((e) => [e, client.listenerCount(e)])).toEqual(listenersBefore);
    expect(await client.ping()).toBe('PONG');
    client.disconnect();
  });

  it("writes a lone script at once and the scripts of a busy turn of the event loop in writes of 16 commands at most, and leaves the client's socket uncorked", async () => {
    const client = new Redis(redis.server.port, '127.0.0.1');
    await client.ping();
    const locks = createLocks({ redis: client, prefix: uniquePrefix() });
    await (await locks.acquire('warm-up')).release(); // the scripts are cached: EVALSHA from here on
    await locks.inspect('warm-up'); // a turn that sends one command
    const socket = client.stream;
    const writes = { calls: 0 };
    // Counted on the socket itself: one syscall-level write per `_write`, one per batch in `_writev`.
    const write = socket._write.bind(socket);
    const writev = socket._writev?.bind(socket);
    socket._write = (...args: Parameters<typeof socket._write>) => {
      writes.calls++;
      return write(...args);
    };
    if (writev) {
      socket._writev = (...args: Parameters<NonNullable<typeof socket._writev>>) => {
        writes.calls++;
        return writev(...args);
      };
    }
    // 40 acquires in one turn, and a command of the user's own in the same turn: the first leaves
    // at once (the turn before sent one command: a lone command never waits for the rest of its
    // turn), the next two full batches of 16 as they fill, the last 7 with the user's command at
    // the end of the turn.
    const acquired = Array.from({ length: 40 }, (_, i) => locks.acquire(`burst-${i}`));
    expect(writes.calls).toBe(3);
    const ping = client.ping();
    expect(socket.writableCorked).toBe(1);
    const leases = await Promise.all(acquired);
    expect(await ping).toBe('PONG');
    expect(writes.calls).toBe(4);
    expect(socket.writableCorked).toBe(0);
    writes.calls = 0;
    await Promise.all(leases.slice(0, 16).map((lease) => lease.release()));
    expect(writes.calls).toBe(1); // the 16 together, at the end of the turn: the turn before was busy
    await Promise.all(leases.slice(16).map((lease) => lease.release()));
    expect(socket.writableCorked).toBe(0);
    socket._write = write;
    if (writev) socket._writev = writev;
    await locks.close();
    expect(socket.writableCorked).toBe(0);
    client.disconnect();
  });

  it('waiting uses one inbox subscription per manager, and close() closes the connection it made', async () => {
    const prefix = uniquePrefix();
    const client = new Redis(redis.server.port, '127.0.0.1');
    const locks = createLocks({ redis: client, prefix });
    const other = await managerOn('ioredis', redis.server.port, { prefix });
    const holders = await Promise.all(['a', 'b', 'c'].map((k) => other.acquire(k)));
    const waiting = ['a', 'b', 'c'].map((k) => locks.acquire(k, { wait: 5000 }));
    await expect.poll(async () => redis.raw.pubsub('CHANNELS', `${prefix}inbox:*`), { timeout: 2000, interval: 10 }).toHaveLength(1);
    for (const h of holders) await h.release();
    for (const w of waiting) await (await w).release();
    expect(await redis.raw.pubsub('CHANNELS', `${prefix}inbox:*`)).toHaveLength(1);
    await locks.close();
    await expect.poll(async () => redis.raw.pubsub('CHANNELS', `${prefix}inbox:*`), { timeout: 2000, interval: 10 }).toHaveLength(0);
    client.disconnect();
  });

  it('a waiter whose subscriber connection is reset still gets the lock when it is released', async () => {
    const prefix = uniquePrefix();
    const locks = await managerOn('ioredis', redis.server.port, { prefix, recheck: 60_000 });
    const other = await managerOn('ioredis', redis.server.port, { prefix });
    const holder = await other.acquire('reset', { ttl: 30_000 });
    const waiting = locks.acquire('reset', { wait: 10_000 });
    await expect.poll(async () => redis.raw.pubsub('CHANNELS', `${prefix}inbox:*`), { timeout: 2000, interval: 10 }).toHaveLength(1);
    await redis.raw.call('CLIENT', 'KILL', 'TYPE', 'pubsub');
    await holder.release(); // published while the subscriber is reconnecting: the message is lost
    const started = performance.now();
    const lease = await waiting;
    expect(performance.now() - started).toBeLessThan(5000); // not the 60 s recheck nor the 30 s TTL
    await lease.release();
  });
});

describe('connecting', () => {
  it('createLocks({ url }) connects itself and closes its connection in close()', async () => {
    // The server's connections, by id, with the last command each ran. Counting them is not
    // enough: earlier tests' clients reconnect and close in the meantime (seen in CI).
    const connections = async (): Promise<Map<string, string>> =>
      new Map([...((await redis.raw.client('LIST')) as string).matchAll(/^id=(\d+) .* cmd=(\S+)/gm)].map((m) => [m[1]!, m[2]!]));
    const before = await connections();
    const locks = createLocks({ url: redis.server.url, prefix: uniquePrefix() });
    const lease = await locks.acquire('url');
    await lease.release();
    // Its own: new since, and last ran a script (the release); a client of another test that
    // reconnected meanwhile ran INFO or SUBSCRIBE.
    const mine = [...(await connections())].filter(([id, cmd]) => !before.has(id) && /^eval/.test(cmd)).map(([id]) => id);
    expect(mine.length).toBeGreaterThanOrEqual(1);
    await locks.close();
    await expect.poll(async () => {
      const now = await connections();
      return mine.filter((id) => now.has(id));
    }, { timeout: 2000, interval: 10 }).toEqual([]);
  });

  it('a Redis that cannot be reached is reported as a BackendError with its cause', async () => {
    const gone = await RedisServer.start();
    const client = new Redis(gone.port, '127.0.0.1', { maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true });
    client.on('error', () => {});
    await gone.stop();
    const locks = createLocks({ redis: client, prefix: uniquePrefix() });
    const error = await locks.acquire('nowhere').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BackendError);
    expect(error).toMatchObject({ code: 'BACKEND_ERROR', operation: 'acquire' });
    expect((error as Error).cause).toBeInstanceOf(Error);
    await locks.close();
    client.disconnect();
  });
});
