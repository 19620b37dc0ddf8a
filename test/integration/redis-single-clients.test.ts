/**
 * A single Redis server and the clients latchkey is given or makes: the borrowed client (used but
 * not modified, its writes batched, one inbox subscription per manager), and connecting by URL or
 * to a Redis that cannot be reached.
 */
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { BackendError, createLocks } from '../../src/index.js';
import { uniquePrefix, useRedisServer } from '../helpers/fixtures.js';
import { RedisServer } from '../helpers/redis-server.js';
import { managersClosedBy } from '../helpers/single-redis-managers.js';

const redis = useRedisServer();
const managerOn = managersClosedBy(redis.cleanup);

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
