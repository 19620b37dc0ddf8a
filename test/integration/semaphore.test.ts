/**
 * Counting semaphores and read-write locks across processes on one redis-server: the limit
 * holds between worker processes, a writer is never beside anyone, and a worker killed with
 * SIGKILL gives its permits back by their TTL.
 */
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocks } from '../../src/index.js';
import { uniquePrefix } from '../helpers/harness.js';
import { lineWorker, type LineWorker } from '../helpers/line-worker.js';
import { RedisServer } from '../helpers/redis-server.js';

const WORKER = new URL('../helpers/permit-worker.mjs', import.meta.url).pathname;
let server: RedisServer;
let url: string;

beforeAll(async () => {
  server = await RedisServer.start();
  url = `redis://127.0.0.1:${server.port}`;
});
afterAll(async () => server.stop());

const worker = (args: string[]): LineWorker => lineWorker(WORKER, [url, ...args]);

describe('a semaphore shared by processes', () => {
  it('never has more than `limit` holders at once across 6 processes, and reaches the limit', async () => {
    const prefix = uniquePrefix();
    const limit = 3;
    const workers = Array.from({ length: 6 }, () => worker([prefix, 'shared', String(limit), 'loop', '25']));
    await Promise.all(workers.map((w) => w.done));
    // Every hold as an interval on the machine's monotonic clock; sweep over their ends.
    const events: Array<[bigint, number]> = [];
    for (const w of workers) {
      expect(w.lines.at(-1)).toBe('done');
      for (const line of w.lines.slice(0, -1)) {
        const [start, end] = line.split(' ').map(BigInt) as [bigint, bigint];
        events.push([start, +1], [end, -1]);
      }
    }
    expect(events).toHaveLength(6 * 25 * 2);
    events.sort((a, b) => (a[0] === b[0] ? a[1] - b[1] : a[0] < b[0] ? -1 : 1));
    let inside = 0;
    let most = 0;
    for (const [, delta] of events) {
      inside += delta;
      most = Math.max(most, inside);
    }
    expect(most).toBeLessThanOrEqual(limit);
    expect(most).toBe(limit);
  });

  it('a read-write lock never has a writer beside anyone else across 6 processes, and readers do overlap', async () => {
    const prefix = uniquePrefix();
    const roles = ['read', 'read', 'read', 'read', 'write', 'write'];
    const workers = roles.map((role) => worker([prefix, 'doc', '0', role, '20']));
    await Promise.all(workers.map((w) => w.done));
    const holds = workers.flatMap((w) => {
      expect(w.lines.at(-1)).toBe('done');
      return w.lines.slice(0, -1).map((line) => {
        const [role, start, end] = line.split(' ') as [string, string, string];
        return { role, start: BigInt(start), end: BigInt(end) };
      });
    });
    expect(holds).toHaveLength(6 * 20);
    const overlap = (a: (typeof holds)[number], b: (typeof holds)[number]): boolean => a.start < b.end && b.start < a.end;
    let readersTogether = 0;
    for (let i = 0; i < holds.length; i++) {
      for (let j = i + 1; j < holds.length; j++) {
        if (!overlap(holds[i]!, holds[j]!)) continue;
        expect([holds[i]!.role, holds[j]!.role]).toEqual(['read', 'read']);
        readersTogether++;
      }
    }
    expect(readersTogether).toBeGreaterThan(0);
  });

  it('frees a read-write lock whose writer was killed with SIGKILL by its TTL', async () => {
    const prefix = uniquePrefix();
    const holder = worker([prefix, 'killed-writer', '0', 'hold-write']);
    const [line] = (await once(createInterface({ input: holder.child.stdout! }), 'line')) as [string];
    const exited = once(holder.child, 'exit');
    holder.child.kill('SIGKILL');
    await exited;
    const client = new Redis(server.port, '127.0.0.1');
    const locks = createLocks({ redis: client, prefix });
    try {
      const rw = locks.readWriteLock('killed-writer');
      expect(await rw.tryRead()).toBeNull();
      const started = performance.now();
      const read = await rw.read({ wait: 5000 });
      expect(performance.now() - started).toBeLessThan(500 + 250);
      expect(read.fence).toBeGreaterThan(Number(line.split(' ')[1]));
      await read.release();
    } finally {
      await locks.close();
      client.disconnect();
    }
  });

  /** Resolves once `count` waiters are queued for the fair lock (polls the queue: no event announces it). */
  async function fairQueued(prefix: string, name: string, count: number): Promise<void> {
    const raw = new Redis(server.port, '127.0.0.1');
    try {
      while ((await raw.zcard(`${prefix}{${name}}:fair:queue`)) < count) await new Promise((r) => setTimeout(r, 5));
    } finally {
      raw.disconnect();
    }
  }

  it('a fair lock passes over a waiter killed with SIGKILL at the next release', async () => {
    const prefix = uniquePrefix();
    const client = new Redis(server.port, '127.0.0.1');
    const [a, b] = [createLocks({ redis: client, prefix }), createLocks({ redis: client, prefix })];
    try {
      const held = await a.fairLock('dead-waiter').acquire({ ttl: 60_000 });
      const doomed = worker([prefix, 'dead-waiter', '0', 'fair-wait', '1000']);
      await fairQueued(prefix, 'dead-waiter', 1);
      const next = b.fairLock('dead-waiter').acquire({ wait: 10_000 });
      await fairQueued(prefix, 'dead-waiter', 2);
      const exited = once(doomed.child, 'exit');
      doomed.child.kill('SIGKILL');
      await exited;
      const released = performance.now();
      await held.release();
      const lease = await next;
      // Its inbox has no listener any more: the release skips it and wakes the next waiter at once.
      expect(performance.now() - released).toBeLessThan(1000);
      await lease.release();
    } finally {
      await Promise.all([a.close(), b.close()]);
      client.disconnect();
    }
  });

  it('a fair lock whose holder and first waiter both died goes to the next waiter within the TTL and 3 rechecks', async () => {
    const prefix = uniquePrefix();
    const client = new Redis(server.port, '127.0.0.1');
    // The holder has a connection of its own, cut when its process "dies": no release, no renewal.
    const holderClient = new Redis(server.port, '127.0.0.1', { retryStrategy: () => null, maxRetriesPerRequest: 0 });
    holderClient.on('error', () => {});
    const recheck = 200;
    const [a, b] = [createLocks({ redis: holderClient, prefix, recheck }), createLocks({ redis: client, prefix, recheck })];
    try {
      // Renewed until it dies, so that the worker queues behind it however long its process takes to start.
      await a.fairLock('all-dead').acquire({ ttl: 300, renew: true });
      const doomed = worker([prefix, 'all-dead', '0', 'fair-wait', String(recheck)]);
      await fairQueued(prefix, 'all-dead', 1);
      const next = b.fairLock('all-dead').acquire({ wait: 10_000 });
      await fairQueued(prefix, 'all-dead', 2);
      const exited = once(doomed.child, 'exit');
      doomed.child.kill('SIGKILL');
      await exited;
      const started = performance.now();
      holderClient.disconnect();
      const lease = await next;
      // Nobody releases: the holder's lease runs out (300 ms at most), the dead waiter's entry lapses 3 rechecks after its last check.
      expect(performance.now() - started).toBeLessThan(300 + 3 * recheck + 1000);
      await lease.release();
    } finally {
      await Promise.all([a.close(), b.close()]);
      client.disconnect();
    }
  });

  it('gives the permits of a process killed with SIGKILL back by their TTL, with no release ever sent', async () => {
    const prefix = uniquePrefix();
    const holder = worker([prefix, 'crash', '2', 'hold']);
    const [line] = (await once(createInterface({ input: holder.child.stdout! }), 'line')) as [string];
    const crashedFence = Number(line.split(' ')[1]);
    const exited = once(holder.child, 'exit');
    holder.child.kill('SIGKILL');
    await exited;
    const client = new Redis(server.port, '127.0.0.1');
    const locks = createLocks({ redis: client, prefix });
    try {
      const sem = locks.semaphore('crash', { limit: 2 });
      expect(await sem.tryAcquire()).toBeNull(); // still held by the dead process's lease
      const started = performance.now();
      const lease = await sem.acquire({ permits: 2, wait: 5000 });
      expect(performance.now() - started).toBeLessThan(500 + 250);
      expect(lease.fence).toBeGreaterThan(crashedFence);
      await lease.release();
    } finally {
      await locks.close();
      client.disconnect();
    }
  });
});
