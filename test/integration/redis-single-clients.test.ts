/**
 * A single Redis server and the clients latchkey is given or makes: the borrowed client (used but
 * not modified, its writes batched, one inbox subscription per manager), and connecting by URL or
 * to a Redis that cannot be reached.
 */
import { once } from 'node:events';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { describe, expect, it } from 'vitest';
import { BackendError, createLocks, InvalidOptionError, type Locks } from '../../src/index.js';
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

  it('bad observability options with { url } are refused before a connection is opened', async () => {
    const own = await RedisServer.start();
    const raw = new Redis(own.port, '127.0.0.1');
    try {
      const url = `redis://127.0.0.1:${own.port}`;
      expect(() => createLocks({ url, hooks: { acquird: () => {} } as never })).toThrow(InvalidOptionError);
      expect(() => createLocks({ url, keyGroup: 'orders' as never })).toThrow(InvalidOptionError);
      // A good manager on the same URL connects after them (the same client module, loaded in
      // order): once it has done a round trip, a connection they had opened would be listed.
      const good = createLocks({ url });
      await good.inspect('x');
      const clients = ((await raw.client('LIST')) as string).trim().split('\n');
      await good.close();
      expect(clients).toHaveLength(2); // this test's raw client and the good manager's
    } finally {
      raw.disconnect();
      await own.stop();
    }
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

/**
 * A waiting manager over an ioredis client whose retryStrategy gives up (its subscriber copies it:
 * dropped, it does not reconnect), a holder's manager, and the ids of the subscriber connections.
 * The holder's TTLs and the waiter's recheck are far: only a grant it hears gets it a lock in time.
 */
async function givingUp(): Promise<{ prefix: string; holderLocks: Locks; client: Redis; waiterLocks: Locks; subscribers: () => Promise<string[]> }> {
  const prefix = uniquePrefix();
  const holderLocks = await managerOn('ioredis', redis.server.port, { prefix });
  const client = new Redis(redis.server.port, '127.0.0.1', { retryStrategy: () => null });
  client.on('error', () => {});
  const waiterLocks = createLocks({ redis: client, prefix, recheck: 60_000 });
  const subscribers = async (): Promise<string[]> =>
    [...((await redis.raw.client('LIST')) as string).matchAll(/^id=(\d+) .*\bsub=[1-9]/gm)].map((m) => m[1]!);
  return { prefix, holderLocks, client, waiterLocks, subscribers };
}

describe('the subscriber connection latchkey makes from the client', () => {
  it('ioredis with enableOfflineQueue: false: a waiter still hears its grant (the subscriber queues its SUBSCRIBE while it connects)', async () => {
    const prefix = uniquePrefix();
    const holderLocks = await managerOn('ioredis', redis.server.port, { prefix });
    const client = new Redis(redis.server.port, '127.0.0.1', { enableOfflineQueue: false });
    client.on('error', () => {});
    await once(client, 'ready');
    const waiterLocks = createLocks({ redis: client, prefix, recheck: 60_000 });
    try {
      const holder = await holderLocks.acquire('offline', { ttl: 30_000 });
      // The holder's TTL and the waiter's recheck are far: only a grant it hears gets it the lock in time.
      const waiting = waiterLocks.acquire('offline', { wait: 5_000 });
      while ((await redis.raw.zcard(`${prefix}{offline}:queue`)) === 0) await new Promise((r) => setTimeout(r, 2));
      await holder.release();
      await (await waiting).release();
    } finally {
      await waiterLocks.close();
      client.disconnect();
    }
  });

  it('ioredis whose retryStrategy gives up: a subscriber dropped for good is replaced at the next wait, which hears its grant', async () => {
    const { prefix, holderLocks, client, waiterLocks, subscribers } = await givingUp();
    // The holder's TTL and the waiter's recheck are far: only a grant it hears gets it the lock in time.
    const waitOnce = async (name: string): Promise<void> => {
      const holder = await holderLocks.acquire(name, { ttl: 30_000 });
      const waiting = waiterLocks.acquire(name, { wait: 5_000 });
      while ((await redis.raw.zcard(`${prefix}{${name}}:queue`)) === 0) await new Promise((r) => setTimeout(r, 2));
      await holder.release();
      // Handed to the waiter in the release (its inbox heard): not free for another caller.
      expect(await holderLocks.tryAcquire(name, { ttl: 30_000 })).toBeNull();
      await (await waiting).release();
    };
    try {
      const before = new Set(await subscribers());
      await waitOnce('first'); // opens the subscriber
      const made = (await subscribers()).filter((id) => !before.has(id));
      expect(made).toHaveLength(1);
      // Drop it: with the retryStrategy it copied from the client, it does not reconnect.
      await redis.raw.client('KILL', 'ID', made[0]!);
      await waitOnce('second');
    } finally {
      await waiterLocks.close();
      client.disconnect();
    }
  });

  it('ioredis whose retryStrategy gives up: a waiter queued when its subscriber is dropped joins the new one and hears its grant', async () => {
    const { prefix, holderLocks, client, waiterLocks, subscribers } = await givingUp();
    try {
      const before = new Set(await subscribers());
      const holder = await holderLocks.acquire('dropped', { ttl: 30_000 });
      const waiting = waiterLocks.acquire('dropped', { wait: 10_000 });
      await expect.poll(() => redis.raw.zcard(`${prefix}{dropped}:queue`), { timeout: 2000, interval: 2 }).toBe(1);
      const made = (await subscribers()).filter((id) => !before.has(id));
      expect(made).toHaveLength(1);
      // Its subscriber dropped for good while it waits: it looks again, and joins a new one.
      await redis.raw.client('KILL', 'ID', made[0]!);
      await expect.poll(async () => (await subscribers()).filter((id) => !before.has(id) && id !== made[0]).length, { timeout: 3000, interval: 5 }).toBe(1);
      await holder.release();
      // Handed to the waiter in the release (its new inbox heard): not free for another caller.
      expect(await holderLocks.tryAcquire('dropped', { ttl: 30_000 })).toBeNull();
      await (await waiting).release();
    } finally {
      await waiterLocks.close();
      client.disconnect();
    }
  });

  it('node-redis: close() ends a subscriber that cannot connect (Redis refuses it) and leaves it closed', async () => {
    const own = await RedisServer.start();
    const raw = new Redis(own.port, '127.0.0.1');
    const holderClient = new Redis(own.port, '127.0.0.1');
    const client = createClient({ url: `redis://127.0.0.1:${own.port}` });
    client.on('error', () => {});
    await client.connect();
    // The connections latchkey makes from the client, to look at them after close().
    const made: Array<{ isOpen: boolean }> = [];
    const duplicate = client.duplicate.bind(client);
    client.duplicate = ((...args: Parameters<typeof duplicate>) => {
      const copy = duplicate(...args);
      made.push(copy);
      return copy;
    }) as typeof client.duplicate;
    const holderLocks = createLocks({ redis: holderClient, prefix: 'sub:' });
    const locks = createLocks({ redis: client, prefix: 'sub:' });
    try {
      await holderLocks.acquire('busy', { ttl: 30_000 });
      await raw.config('SET', 'maxclients', String(((await raw.client('LIST')) as string).trim().split('\n').length));
      // Its subscriber is refused ("max number of clients reached") and node-redis retries forever.
      await expect(locks.acquire('busy', { wait: 300 })).rejects.toMatchObject({ code: 'LOCK_TIMEOUT' });
      expect(made.length).toBeGreaterThanOrEqual(1);
      await locks.close();
      expect(made.filter((c) => c.isOpen)).toEqual([]);
    } finally {
      await raw.config('SET', 'maxclients', '10000');
      await holderLocks.close();
      holderClient.disconnect();
      await client.close().catch(() => {});
      raw.disconnect();
      await own.stop();
    }
  });
});
