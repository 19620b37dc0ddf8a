/**
 * What a test file sets up beside (or instead of) a backend harness: a unique key prefix, a raw
 * client on a test server, a redis-server of the file's own (useRedisServer), and managers over
 * clients made for them, closed at the end (managerOver). Also exported from harness.ts.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import { createLocks, type Locks, type LocksOptions } from '../../src/index.js';
import { RedisServer } from './redis-server.js';

/** A key prefix of the test's own (`t` and 8 random hex digits, then `:`). */
export const uniquePrefix = (): string => `t${randomBytes(4).toString('hex')}:`;

/** A raw ioredis connection to a test server, for inspecting and tampering with keys. */
export function rawClient(server: RedisServer): Redis {
  return new Redis(server.port, '127.0.0.1', { maxRetriesPerRequest: 1 });
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
