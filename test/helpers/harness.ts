/**
 * One harness per backend for the contract suite: the same tests run on a single Redis through
 * ioredis, through node-redis, and on the in-memory store.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { createLocks, createMemoryStore, type Locks, type LocksOptions } from '../../src/index.js';
import { lockKeys } from '../../src/keys.js';
import { RedisServer } from './redis-server.js';

export type LocksSettings = Omit<LocksOptions, 'redis' | 'url' | 'memory'>;

export interface BackendHarness {
  readonly name: string;
  /** A manager on the shared backend; closed by `close()`. */
  locks(settings?: LocksSettings): Locks;
  /** Deletes a lock key behind its holder's back. */
  forceDelete(prefix: string, name: string): Promise<void>;
  close(): Promise<void>;
}

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
    close: async () => {
      await Promise.all(made.map((l) => l.close()));
    },
  };
}

/** A raw ioredis connection to a test server, for inspecting and tampering with keys. */
export function rawClient(server: RedisServer): Redis {
  return new Redis(server.port, '127.0.0.1', { maxRetriesPerRequest: 1 });
}

export async function ioredisHarness(server: RedisServer): Promise<BackendHarness> {
  const raw = rawClient(server);
  const clients: Redis[] = [];
  const made: Locks[] = [];
  return {
    name: 'redis via ioredis',
    locks: (settings) => {
      const client = new Redis(server.port, '127.0.0.1');
      clients.push(client);
      const locks = createLocks({ ...settings, redis: client });
      made.push(locks);
      return locks;
    },
    forceDelete: async (prefix, name) => {
      await raw.del(lockKeys(prefix, name).lock);
    },
    close: async () => {
      await Promise.all(made.map((l) => l.close()));
      await Promise.all(clients.map((c) => c.quit()));
      await raw.quit();
    },
  };
}

export async function nodeRedisHarness(server: RedisServer): Promise<BackendHarness> {
  const raw = rawClient(server);
  const clients: Array<ReturnType<typeof createClient>> = [];
  const made: Locks[] = [];
  // Connect a pool up front: createLocks is synchronous and wants a connected client.
  const pool = await Promise.all(
    Array.from({ length: 4 }, async () => {
      const client = createClient({ url: server.url });
      client.on('error', () => {});
      await client.connect();
      return client;
    }),
  );
  return {
    name: 'redis via node-redis',
    locks: (settings) => {
      const client = pool[made.length % pool.length]!;
      clients.push(client);
      const locks = createLocks({ ...settings, redis: client });
      made.push(locks);
      return locks;
    },
    forceDelete: async (prefix, name) => {
      await raw.del(lockKeys(prefix, name).lock);
    },
    close: async () => {
      await Promise.all(made.map((l) => l.close()));
      await Promise.all(pool.map((c) => c.close()));
      await raw.quit();
    },
  };
}
