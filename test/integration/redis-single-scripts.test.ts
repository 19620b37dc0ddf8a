/**
 * What is specific to a single Redis server, in latchkey's scripts: the script cache, the keys an
 * acquire writes, WRONGTYPE, fence counters, and the seeds' traps that only a real server shows
 * (the acquire script called directly). Data loss, slow replies and a crashed holder are in
 * redis-single-failures.test.ts, the borrowed client and connecting in redis-single-clients.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { WrongTypeError } from '../../src/index.js';
import { adaptClient } from '../../src/client/detect.js';
import { lockKeys } from '../../src/keys.js';
import { runScript } from '../../src/lua/run-script.js';
import { acquireScript, extendScript, releaseScript } from '../../src/lua/scripts.generated.js';
import { rawClient, uniquePrefix, useRedisServer } from '../helpers/fixtures.js';
import { RedisServer } from '../helpers/redis-server.js';
import { managersClosedBy, type Driver } from '../helpers/single-redis-managers.js';

const redis = useRedisServer();
const managerOn = managersClosedBy(redis.cleanup);

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
