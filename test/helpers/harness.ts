/**
 * One harness per backend for the contract suite: the same tests run on a single Redis through
 * ioredis, through node-redis, and on the in-memory store.
 */
import { Cluster, Redis } from 'ioredis';
import { Valkey } from 'iovalkey';
import { GlideClient, GlideClusterClient, Logger as GlideLogger } from '@valkey/valkey-glide';
import { createCluster } from 'redis';
import { createLocks, createMemoryStore, type Locks, type LocksOptions, type RedisClientLike } from '../../src/index.js';
import { lockKeys, semaphoreKeys, type SemaphoreKind } from '../../src/keys.js';
import { IOREDIS_6, NODE_REDIS_6, type IoredisCell, type IoredisFamilyClient, type NodeRedisCell } from './client-cells.js';
import { rawClient } from './fixtures.js';
import type { RedisCluster } from './redis-cluster.js';
import type { RedisServer } from './redis-server.js';

// A test file's own fixtures, in fixtures.ts since they are no harness; importers still find them here.
export { managerOver, rawClient, uniquePrefix, useRedisServer } from './fixtures.js';

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
  /**
   * Real servers only: makes Redis slow to answer, as a busy or stalled server is. Every write,
   * latchkey's scripts included, is held for `ms` on every node (`CLIENT PAUSE ms WRITE`); reads
   * and subscriptions still pass. Resolves once the hold is in effect. With `behind`, the pause is
   * sent on that manager's own connection(s), so it takes effect right after the commands the
   * manager has sent so far (they are answered) and before any it sends later.
   *
   * (Not `DEBUG SLEEP`: its reply comes when it ends, so nothing tells when it began, and a
   * command another connection sends right after it may run first.)
   */
  stall?(ms: number, behind?: Locks): Promise<void>;
  /**
   * Real servers only: resolves once every node ran the writes it received before this call,
   * those a stall holds included (a write sent now is held behind them: first in, first out).
   */
  caughtUp?(): Promise<void>;
  close(): Promise<void>;
}

/** A connection of the harness's own, or a manager's: what a stall is sent on. */
type Connection = Cluster | IoredisFamilyClient;

/** Holds writes on every master the connection reaches, for `ms` (see {@link BackendHarness.stall}). */
async function pauseWrites(connection: Connection, ms: number): Promise<void> {
  const nodes: IoredisFamilyClient[] = connection instanceof Cluster ? connection.nodes('master') : [connection];
  await Promise.all(
    nodes.map(async (node) => {
      await readyFirst(node);
      await node.call('CLIENT', 'PAUSE', String(ms), 'WRITE');
    }),
  );
}

/**
 * Resolves once an ioredis connection is ready. Before that, ioredis writes CLIENT commands (one of
 * its handshake commands) at once, but holds every other command in its offline queue until the
 * ready check passes: a CLIENT PAUSE sent on a manager's new connection overtook the manager's
 * first script and held it (the give-up contract's "later attempt" tests then saw one attempt, not
 * two: 1 run in 20 or so). ioredis announces 'ready' on the next tick, after it wrote the queue.
 */
async function readyFirst(node: IoredisFamilyClient): Promise<void> {
  if (node.status === undefined || node.status === 'ready') return;
  await new Promise<void>((resolve) => node.once('ready', () => resolve()));
}

/** A write that touches no key (PUBLISH, which a write pause holds): queued behind the writes held before it. */
async function writeBarrier(connection: Redis | Cluster): Promise<void> {
  const nodes = connection instanceof Cluster ? connection.nodes('master') : [connection];
  await Promise.all(nodes.map((node) => node.publish('latchkey-test:barrier', '')));
}

/** Any spec: the keys of a semaphore do not depend on it. */
const SPEC = { limit: 1, permits: 1 };

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

/**
 * A harness on a real server or cluster, given a raw ioredis client on it (for inspecting and
 * tampering with keys; closed with the harness) and a way to get a client for each new manager.
 */
function redisHarness(
  name: string,
  raw: Redis | Cluster,
  clientFor: (index: number) => unknown,
  closeClients: () => Promise<unknown>,
  more: {
    /** Settings every manager gets (the call's own come on top). */
    readonly settings?: LocksSettings;
    /** Sends `CLIENT PAUSE ms WRITE` on a manager's client: given, the harness can stall the server. */
    readonly pauseOn?: (client: unknown, ms: number) => Promise<unknown>;
  } = {},
): BackendHarness {
  const made: Locks[] = [];
  const clients = new Map<Locks, unknown>();
  const pauseOn = more.pauseOn;
  return {
    name,
    locks: (settings) => {
      const client = clientFor(made.length);
      const locks = createLocks({ ...more.settings, ...settings, redis: client as RedisClientLike });
      made.push(locks);
      clients.set(locks, client);
      return locks;
    },
    forceDelete: async (prefix, lock) => {
      await raw.del(lockKeys(prefix, lock).lock);
    },
    queued: (prefix, lock) => raw.zcard(lockKeys(prefix, lock).queue),
    semaphoreQueued: (prefix, name, kind) => raw.zcard(semaphoreKeys(prefix, name, SPEC, kind).queue),
    ...(pauseOn && {
      stall: async (ms: number, behind?: Locks) => {
        if (behind === undefined) await pauseWrites(raw, ms);
        else await pauseOn(clients.get(behind), ms);
      },
      caughtUp: () => writeBarrier(raw),
    }),
    close: async () => {
      await Promise.all(made.map((l) => l.close()));
      await closeClients();
      await raw.quit();
    },
  };
}

/** One new client per manager, quit at the end (ioredis and its fork iovalkey). */
function clientPerManagerHarness(label: string, server: RedisServer, make: () => IoredisFamilyClient, settings?: LocksSettings): BackendHarness {
  const clients: IoredisFamilyClient[] = [];
  return redisHarness(
    label,
    rawClient(server),
    () => {
      const client = make();
      clients.push(client);
      return client;
    },
    () => Promise.all(clients.map((c) => c.quit())),
    { ...(settings && { settings }), pauseOn: (client, ms) => pauseWrites(client as IoredisFamilyClient, ms) },
  );
}

/**
 * Managers share a pool of clients connected up front (createLocks is synchronous and wants a
 * connected client), the i-th manager the (i mod n)-th client; `close` ends them.
 */
function pooledHarness<C>(
  label: string,
  raw: Redis | Cluster,
  pool: C[],
  close: (pool: C[]) => Promise<unknown>,
  pauseOn?: (client: C, ms: number) => Promise<unknown>,
): BackendHarness {
  return redisHarness(label, raw, (index) => pool[index % pool.length], () => close(pool), pauseOn ? { pauseOn: (client, ms) => pauseOn(client as C, ms) } : {});
}

/** One ioredis client per manager, of the client × protocol cell `cell` (default: ioredis 6 as it comes). */
export async function ioredisHarness(server: RedisServer, cell: IoredisCell = IOREDIS_6): Promise<BackendHarness> {
  return clientPerManagerHarness(`redis via ${cell.label}`, server, () => cell.make(server.port));
}

/** A pool of node-redis clients of the cell `cell` (default: node-redis 6 as it comes), shared by the managers. */
export async function nodeRedisHarness(server: RedisServer, cell: NodeRedisCell = NODE_REDIS_6): Promise<BackendHarness> {
  const pool = await Promise.all(
    Array.from({ length: 4 }, async () => {
      const client = cell.make(server.url);
      client.on('error', () => {});
      await client.connect();
      return client;
    }),
  );
  return pooledHarness(
    `redis via ${cell.label}`,
    rawClient(server),
    pool,
    (clients) => Promise.all(clients.map((c) => c.close())),
    (client, ms) => client.sendCommand(['CLIENT', 'PAUSE', String(ms), 'WRITE']),
  );
}

/**
 * Replica acknowledgement (`replication`) on a primary through ioredis, one client per manager:
 * wake mode on one Redis (a release frees the lock and wakes the next waiter, whose own acquire
 * and WAIT take it).
 */
export function replicatedHarness(primary: RedisServer, replicas: number): BackendHarness {
  // A generous WAIT timeout: the test files run in parallel on a busy machine.
  return clientPerManagerHarness(`redis with ${replicas} replica(s) acknowledging, via ioredis`, primary, () => new Redis(primary.port, '127.0.0.1'), {
    replication: { replicas, timeout: 2000 },
  });
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
  return pooledHarness('redis via valkey-glide', rawClient(server), pool, closeGlide, (client, ms) => client.customCommand(['CLIENT', 'PAUSE', String(ms), 'WRITE']));
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
  const clientOf = new Map<Locks, Redis>();
  return {
    name: 'redis compat timestamp via ioredis',
    locks: (settings) => {
      const client = new Redis(server.port, '127.0.0.1');
      clients.push(client);
      const locks = createLocks({ ...settings, compat: 'timestamp', redis: client });
      made.push(locks);
      clientOf.set(locks, client);
      return locks;
    },
    forceDelete: async (prefix, name) => {
      await raw.del(`${prefix}${name}`);
    },
    queued: (prefix, name) => raw.zcard(lockKeys(prefix, name).queue),
    semaphoreQueued: async () => 0,
    stall: (ms, behind) => pauseWrites(behind ? clientOf.get(behind)! : raw, ms),
    caughtUp: () => writeBarrier(raw),
    close: async () => {
      await Promise.all(made.map((l) => l.close()));
      await Promise.all(clients.map((c) => c.quit()));
      await raw.quit();
    },
  };
}

/** Redlock over independent servers: each manager gets its own ioredis client per node. */
export function redlockHarness(servers: readonly RedisServer[]): BackendHarness {
  const raws = servers.map(rawClient);
  const made: Locks[] = [];
  const clients: Redis[] = [];
  const nodesOf = new Map<Locks, Redis[]>();
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
      nodesOf.set(locks, nodes);
      return locks;
    },
    // Every node: a Redlock whose majority answers is not slow.
    stall: async (ms, behind) => {
      await Promise.all((behind ? nodesOf.get(behind)! : raws).map((node) => pauseWrites(node, ms)));
    },
    caughtUp: async () => {
      await Promise.all(raws.map(writeBarrier));
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
