/**
 * The nodes of a Redlock test file: redis-server processes of the file's own with a raw client on
 * each, Redlock managers over them, and the wait for effects of late replies.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import type { Locks } from '../../src/index.js';
import { managerOver, rawClient } from './fixtures.js';
import { RedisServer } from './redis-server.js';

export interface RedlockNodes {
  /** The servers, started in beforeAll and stopped in afterAll. */
  readonly servers: RedisServer[];
  /** A raw client on each server (errors ignored), for inspecting and tampering with keys. */
  readonly raws: Redis[];
  /** Clean-up steps, run in reverse order in afterAll before the servers stop. */
  readonly cleanup: Array<() => Promise<unknown>>;
  /** A Redlock manager over `on` (default: all the servers), with its own clients (no retries, so a dead node fails fast). */
  redlock(settings: { prefix: string; nodeTimeout?: number; recheck?: number }, on?: readonly RedisServer[]): Locks;
}

/** Starts `count` redis-server processes for the calling test file (beforeAll) and stops them after (afterAll). */
export function useRedlockNodes(count: number): RedlockNodes {
  const servers: RedisServer[] = [];
  const raws: Redis[] = [];
  const cleanup: Array<() => Promise<unknown>> = [];
  beforeAll(async () => {
    servers.push(...(await Promise.all(Array.from({ length: count }, () => RedisServer.start()))));
    raws.push(...servers.map(rawClient));
    for (const raw of raws) raw.on('error', () => {});
  });
  afterAll(async () => {
    for (const step of cleanup.reverse()) await step();
    for (const raw of raws) raw.disconnect();
    await Promise.all(servers.map((s) => s.stop()));
  });
  const redlock = (settings: { prefix: string; nodeTimeout?: number; recheck?: number }, on: readonly RedisServer[] = servers): Locks => {
    const clients = on.map((s) => new Redis(s.port, '127.0.0.1', { maxRetriesPerRequest: 0, retryStrategy: () => 50 }));
    return managerOver(cleanup, clients, { ...settings, redlock: clients });
  };
  return { servers, raws, cleanup, redlock };
}

/** Keeps asking until `check` holds, for at most `ms` (for effects of late replies, which no event announces). */
export async function eventually(check: () => Promise<boolean>, ms = 3000): Promise<boolean> {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, 10));
  }
  return check();
}
