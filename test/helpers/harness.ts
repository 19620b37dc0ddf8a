/**
 * One harness per backend for the contract suite: the same tests run on a single Redis through
 * ioredis, through node-redis, and on the in-memory store.
 */
import { randomBytes } from 'node:crypto';
import { Cluster, Redis } from 'ioredis';
import { Valkey } from 'iovalkey';
import { GlideClient, GlideClusterClient, Logger as GlideLogger } from '@valkey/valkey-glide';
import { afterAll, beforeAll } from 'vitest';
import { createClient, createCluster } from 'redis';
import { createLocks, createMemoryStore, type Locks, type LocksOptions } from '../../src/index.js';
import { lockKeys, semaphoreKeys, type SemaphoreKind } from '../../src/keys.js';
import type { RedisCluster } from './redis-cluster.js';
import { RedisServer } from './redis-server.js';

export type LocksSettings = Omit<LocksOptions, 'redis' | 'url' | 'memory'>;

export interface BackendHarness {
  readonly name: string;

  /** A manager on the shared backend; closed by `close()`. */
  locks(settings?: LocksSettings): Locks;
  /** Deletes a lock key behind its holder's back. */
  forceDelete(prefix: string, name: string): Promise<void>;
  /** How many waiters are queued for the lock in the backend (on any node, for Redlock). */
  queued(prefix: string, name: string): Promise<number>;
  /** How many waiters are queued for the semaphore `name` in the backend (0 where semaphores do not exist). */
  semaphoreQueued(prefix: string, name: string, kind?: SemaphoreKind): Promise<number>;
  close(): Promise<void>;
}

/** Any spec: the keys of a semaphore do not depend on it. */
const SPEC = { limit: 1, permits: 1 };

export const uniquePrefix = (): string => `t${randomBytes(4).toString('hex')}:`;

export function memoryHarness(): BackendHarness {
  const store = createMemoryStore();
  const made: Locks[] = [];
  return {
    name: 'memory',
    locks: (settings) => {
      const locks = createLocks({ ...settings, memory: store });
      made.push(locks);
      return locks;
    },
    forceDelete: async (prefix, name) => {
      store.forceRelease(lockKeys(prefix, name).lock);
    },
    queued: async (prefix, name) => store.queueLength(lockKeys(prefix, name).lock),
    semaphoreQueued: async (prefix, name, kind) => store.semaphoreQueueLength(semaphoreKeys(prefix, name, SPEC, kind).lock),
    close: async () => {
      await Promise.all(made.map((l) => l.close()));
    },
  };
}

/** A raw ioredis connection to a test server, for inspecting and tampering with keys. */
export function rawClient(server: RedisServer): Redis {
  return new Redis(server.port, '127.0.0.1', { maxRetriesPerRequest: 1 });
}

/**
 * A harness on a real server or cluster, given a raw ioredis client on it (for inspecting and
 * tampering with keys; closed with the harness) and a way to get a client for each new manager.
 */
function redisHarness(
  name: string,
  raw: Redis | Cluster,
  clientFor: (index: number) => unknown,
  closeClients: () => Promise<unknown>,
): BackendHarness {
  const made: Locks[] = [];
  return {
    name,
    locks: (settings) => {
      const locks = createLocks({ ...settings, redis: clientFor(made.length) });
      made.push(locks);
      return locks;
    },
    forceDelete: async (prefix, lock) => {
      await raw.del(lockKeys(prefix, lock).lock);
    },
    queued: (prefix, lock) => raw.zcard(lockKeys(prefix, lock).queue),
    semaphoreQueued: (prefix, name, kind) => raw.zcard(semaphoreKeys(prefix, name, SPEC, kind).queue),
    close: async () => {
      await Promise.all(made.map((l) => l.close()));
      await closeClients();
      await raw.quit();
    },
  };
}

/** One new client per manager, quit at the end (ioredis and its fork iovalkey). */
function clientPerManagerHarness(label: string, server: RedisServer, make: () => Redis | Valkey): BackendHarness {
  const clients: (Redis | Valkey)[] = [];
  return redisHarness(
    label,
    rawClient(server),
    () => {
      const client = make();
      clients.push(client);
      return client;
    },
    () => Promise.all(clients.map((c) => c.quit())),
  );
}

/**
 * Managers share a pool of clients connected up front (createLocks is synchronous and wants a
 * connected client), the i-th manager the (i mod n)-th client; `close` ends them.
 */
function pooledHarness<C>(label: string, raw: Redis | Cluster, pool: C[], close: (pool: C[]) => Promise<unknown>): BackendHarness {
  return redisHarness(label, raw, (index) => pool[index % pool.length], () => close(pool));
}

export async function ioredisHarness(server: RedisServer): Promise<BackendHarness> {
  return clientPerManagerHarness('redis via ioredis', server, () => new Redis(server.port, '127.0.0.1'));
}

export async function nodeRedisHarness(server: RedisServer): Promise<BackendHarness> {
  const pool = await Promise.all(
    Array.from({ length: 4 }, async () => {
      const client = createClient({ url: server.url });
      client.on('error', () => {});
      await client.connect();
      return client;
    }),
  );
  return pooledHarness('redis via node-redis', rawClient(server), pool, (clients) => Promise.all(clients.map((c) => c.close())));
}

/** iovalkey (Valkey's fork of ioredis): one client per manager, as with ioredis. */
export async function iovalkeyHarness(server: RedisServer): Promise<BackendHarness> {
  return clientPerManagerHarness('redis via iovalkey', server, () => new Valkey(server.port, '127.0.0.1'));
}

/** A connected Valkey GLIDE client on a test server. */
export function glideClient(server: RedisServer): Promise<GlideClient> {
  return GlideClient.createClient({ addresses: [{ host: '127.0.0.1', port: server.port }], requestTimeout: 2000 });
}

/**
 * Valkey GLIDE `GlideClient`: a small pool connected up front (createLocks is synchronous and
 * wants a ready client), shared by the managers. GLIDE's own logger warns on every error reply
 * (including the NOSCRIPT that precedes a script's first EVAL): errors only, for readable output.
 */
export async function glideHarness(server: RedisServer): Promise<BackendHarness> {
  GlideLogger.setLoggerConfig('error');
  const pool = await Promise.all(Array.from({ length: 3 }, () => glideClient(server)));
  return pooledHarness('redis via valkey-glide', rawClient(server), pool, closeGlide);
}

async function closeGlide(pool: (GlideClient | GlideClusterClient)[]): Promise<void> {
  for (const client of pool) client.close();
}

/**
 * Compat mode (`compat: 'timestamp'`) on a real server through ioredis: the lock key is
 * `prefix + name` itself, latchkey's queue and owner keys sit beside it under `<prefix>{<name>}`.
 */
export async function compatHarness(server: RedisServer): Promise<BackendHarness> {
  const raw = rawClient(server);
  const clients: Redis[] = [];
  const made: Locks[] = [];
  return {
    name: 'redis compat timestamp via ioredis',
    locks: (settings) => {
      const client = new Redis(server.port, '127.0.0.1');
      clients.push(client);
      const locks = createLocks({ ...settings, compat: 'timestamp', redis: client });
      made.push(locks);
      return locks;
    },
    forceDelete: async (prefix, name) => {
      await raw.del(`${prefix}${name}`);
    },
    queued: (prefix, name) => raw.zcard(lockKeys(prefix, name).queue),
    semaphoreQueued: async () => 0,
    close: async () => {
      await Promise.all(made.map((l) => l.close()));
      await Promise.all(clients.map((c) => c.quit()));
      await raw.quit();
    },
  };
}

/**
 * Starts a redis-server for the calling test file (beforeAll) and stops it after (afterAll),
 * with a raw client for inspecting keys and a list of clean-up steps run in reverse order first.
 */
export function useRedisServer(): { readonly server: RedisServer; readonly raw: Redis; readonly cleanup: Array<() => Promise<unknown>> } {
  const context = { server: undefined as unknown as RedisServer, raw: undefined as unknown as Redis, cleanup: [] as Array<() => Promise<unknown>> };
  beforeAll(async () => {
    context.server = await RedisServer.start();
    context.raw = rawClient(context.server);
  });
  afterAll(async () => {
    for (const step of context.cleanup.reverse()) await step();
    context.raw.disconnect();
    await context.server.stop();
  });
  return context;
}

/** Redlock over independent servers: each manager gets its own ioredis client per node. */
export function redlockHarness(servers: readonly RedisServer[]): BackendHarness {
  const raws = servers.map(rawClient);
  const made: Locks[] = [];
  const clients: Redis[] = [];
  return {
    name: `redlock over ${servers.length} servers`,
    locks: (settings) => {
      const nodes = servers.map((server) => {
        const client = new Redis(server.port, '127.0.0.1', { maxRetriesPerRequest: 1 });
        client.on('error', () => {});
        clients.push(client);
        return client;
      });
      const locks = createLocks({ ...settings, redlock: nodes });
      made.push(locks);
      return locks;
    },
    forceDelete: async (prefix, lock) => {
      await Promise.all(raws.map((raw) => raw.del(lockKeys(prefix, lock).lock)));
    },
    queued: async (prefix, lock) => Math.max(...(await Promise.all(raws.map((raw) => raw.zcard(lockKeys(prefix, lock).queue))))),
    semaphoreQueued: async () => 0,
    close: async () => {
      await Promise.all(made.map((l) => l.close()));
      for (const c of [...clients, ...raws]) c.disconnect();
    },
  };
}

/** A raw client on a cluster, for inspecting and tampering with keys. */
function rawClusterClient(cluster: RedisCluster): Cluster {
  const raw = new Cluster(cluster.startupNodes);
  raw.on('error', () => {});
  return raw;
}

/** Redis Cluster through ioredis `Cluster`: one client per manager. */
export function ioredisClusterHarness(cluster: RedisCluster): BackendHarness {
  const clients: Cluster[] = [];
  return redisHarness(
    'redis cluster via ioredis',
    rawClusterClient(cluster),
    () => {
      const client = new Cluster(cluster.startupNodes);
      client.on('error', () => {});
      clients.push(client);
      return client;
    },
    async () => {
      for (const c of clients) c.disconnect();
    },
  );
}

/** Redis Cluster through node-redis `createCluster`: a small pool of connected clients, shared by the managers. */
export async function nodeRedisClusterHarness(cluster: RedisCluster): Promise<BackendHarness> {
  const pool = await Promise.all(
    Array.from({ length: 3 }, async () => {
      const client = createCluster({ rootNodes: cluster.rootNodes });
      client.on('error', () => {});
      await client.connect();
      return client;
    }),
  );
  return pooledHarness('redis cluster via node-redis', rawClusterClient(cluster), pool, (clients) => Promise.all(clients.map((c) => c.close())));
}

/** Redis Cluster through Valkey GLIDE `GlideClusterClient`: a small pool connected up front, shared by the managers. */
export async function glideClusterHarness(cluster: RedisCluster): Promise<BackendHarness> {
  GlideLogger.setLoggerConfig('error');
  const pool = await Promise.all(
    Array.from({ length: 3 }, () => GlideClusterClient.createClient({ addresses: cluster.startupNodes, requestTimeout: 2000 })),
  );
  return pooledHarness('redis cluster via valkey-glide', rawClusterClient(cluster), pool, closeGlide);
}

type Droppable = { on(event: 'error', listener: () => void): unknown; disconnect(): void };

/**
 * `createLocks(options)` over clients made for it: their errors are left to the calls that fail,
 * and `cleanup` closes the manager, then drops the clients.
 */
export function managerOver(cleanup: Array<() => Promise<unknown>>, clients: readonly Droppable[], options: LocksOptions): Locks {
  for (const client of clients) client.on('error', () => {});
  const locks = createLocks(options);
  cleanup.push(async () => {
    await locks.close();
    for (const client of clients) client.disconnect();
  });
  return locks;
}
