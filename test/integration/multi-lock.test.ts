/**
 * Multi-locks across processes on one redis-server: workers taking random overlapping key sets
 * never hold overlapping sets at once and never hold only part of a set; a worker killed with
 * SIGKILL while holding several keys gives them all back by their TTL.
 */
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocks, WrongTypeError } from '../../src/index.js';
import { uniquePrefix } from '../helpers/harness.js';
import { lineWorker, type LineWorker } from '../helpers/line-worker.js';
import { RedisServer } from '../helpers/redis-server.js';

const WORKER = new URL('../helpers/multi-worker.mjs', import.meta.url).pathname;
let server: RedisServer;
let url: string;

beforeAll(async () => {
  server = await RedisServer.start();
  url = `redis://127.0.0.1:${server.port}`;
});
afterAll(async () => server.stop());

const worker = (args: string[]): LineWorker => lineWorker(WORKER, [url, ...args]);

interface Hold {
  readonly start: bigint;
  readonly end: bigint;
  readonly keys: readonly string[];
  readonly worker: number;
}

describe('multi-locks shared by processes', () => {
  it('6 processes on random overlapping key sets: never two overlapping sets held at once, never a partial set', async () => {
    const prefix = uniquePrefix();
    const rounds = 20;
    const workers = Array.from({ length: 6 }, (_, i) => worker([prefix, 'loop', String(1000 + i * 7919), String(rounds), '5']));
    await Promise.all(workers.map((w) => w.done));
    const holds: Hold[] = [];
    workers.forEach((w, i) => {
      expect(w.lines.at(-1)).toBe('done');
      for (const line of w.lines.slice(0, -1)) {
        const [start, end, keys, whole] = line.split(' ') as [string, string, string, string];
        expect(whole).toBe('all'); // every part held in Redis inside the hold
        holds.push({ start: BigInt(start), end: BigInt(end), keys: keys.split(','), worker: i });
      }
    });
    expect(holds).toHaveLength(6 * rounds);
    // Per key, a sweep over the holds that include it: never two at once.
    const keys = new Set(holds.flatMap((h) => h.keys));
    let overlapsSeen = 0;
    for (const key of keys) {
      const events: Array<[bigint, number]> = [];
      for (const h of holds) if (h.keys.includes(key)) events.push([h.start, +1], [h.end, -1]);
      events.sort((a, b) => (a[0] === b[0] ? a[1] - b[1] : a[0] < b[0] ? -1 : 1));
      let inside = 0;
      for (const [, delta] of events) {
        inside += delta;
        expect(inside).toBeLessThanOrEqual(1);
      }
    }
    // The sets did contend: some holds of disjoint sets ran at the same time (so holds were concurrent at all).
    for (const a of holds) {
      for (const b of holds) {
        if (a.worker < b.worker && a.start < b.end && b.start < a.end) overlapsSeen++;
      }
    }
    expect(overlapsSeen).toBeGreaterThan(0);
    // Nothing is left held.
    const raw = new Redis(server.port, '127.0.0.1');
    try {
      expect(await raw.exists(...[...keys].map((k) => `${prefix}{${k}}`))).toBe(0);
    } finally {
      raw.disconnect();
    }
  });

  it('gives back every key of a process killed with SIGKILL by their TTL, with no release ever sent', async () => {
    const prefix = uniquePrefix();
    const holder = worker([prefix, 'hold', 'c1,c2,c3']);
    const [line] = (await once(createInterface({ input: holder.child.stdout! }), 'line')) as [string];
    const crashedFences = line.split(' ').slice(1).map(Number);
    expect(crashedFences).toHaveLength(3);
    const exited = once(holder.child, 'exit');
    holder.child.kill('SIGKILL');
    await exited;
    const client = new Redis(server.port, '127.0.0.1');
    const locks = createLocks({ redis: client, prefix });
    try {
      expect(await locks.tryAcquireAll(['c1', 'c9'])).toBeNull(); // still held by the dead process's lease
      expect(await locks.tryAcquire('c3')).toBeNull();
      const started = performance.now();
      const all = await locks.acquireAll(['c3', 'c2', 'c1'], { wait: 5000 });
      expect(performance.now() - started).toBeLessThan(500 + 250);
      expect(all.keys).toEqual(['c1', 'c2', 'c3']);
      all.keys.forEach((key, i) => expect(all.fence(key)).toBeGreaterThan(crashedFences[i]!));
      await all.release();
    } finally {
      await locks.close();
      client.disconnect();
    }
  });

  describe('the one-script first attempt (multi-acquire.lua) on a single Redis', () => {
    it('takes free keys in one script (one token in every lock key); writes nothing when one is busy or of the wrong type', async () => {
      const prefix = uniquePrefix();
      const client = new Redis(server.port, '127.0.0.1');
      const raw = new Redis(server.port, '127.0.0.1');
      const [a, b] = [createLocks({ redis: client, prefix }), createLocks({ redis: client, prefix })];
      try {
        const all = await a.acquireAll(['s2', 's1', 's3']);
        expect(new Set(await raw.mget(`${prefix}{s1}`, `${prefix}{s2}`, `${prefix}{s3}`))).toEqual(new Set([all.leases[0]!.token]));
        expect(new Set(all.keys.map((k) => all.fence(k))).size).toBe(1); // one TIME for fresh counters
        await all.release();
        expect(await raw.exists(`${prefix}{s1}`, `${prefix}{s2}`, `${prefix}{s3}`)).toBe(0);

        const holder = await b.acquire('busy');
        expect(await a.tryAcquireAll(['fresh', 'busy', 'zzz'])).toBeNull();
        // Not even the fence counters of the free locks were written.
        expect(await raw.exists(`${prefix}{fresh}`, `${prefix}{fresh}:fence`, `${prefix}{zzz}`, `${prefix}{zzz}:fence`)).toBe(0);
        await holder.release();

        await raw.hset(`${prefix}{wrong}`, 'f', 'v');
        await expect(a.tryAcquireAll(['fresh', 'wrong'])).rejects.toBeInstanceOf(WrongTypeError);
        expect(await raw.exists(`${prefix}{fresh}`, `${prefix}{fresh}:fence`)).toBe(0);
      } finally {
        await Promise.all([a.close(), b.close()]);
        client.disconnect();
        raw.disconnect();
      }
    });

    it('falls back to the ordered path when a key is busy, and then holds each key with a token of its own', async () => {
      const prefix = uniquePrefix();
      const client = new Redis(server.port, '127.0.0.1');
      const raw = new Redis(server.port, '127.0.0.1');
      const [a, b] = [createLocks({ redis: client, prefix }), createLocks({ redis: client, prefix })];
      try {
        const holder = await b.acquire('o2', { ttl: 10_000 });
        const waiting = a.acquireAll(['o1', 'o2'], { wait: 5000 });
        await new Promise((r) => setTimeout(r, 50));
        expect(await raw.get(`${prefix}{o1}`)).not.toBeNull(); // o1 taken, o2 waited for
        await holder.release();
        const all = await waiting;
        const tokens = await raw.mget(`${prefix}{o1}`, `${prefix}{o2}`);
        expect(tokens).toEqual(all.leases.map((p) => p.token));
        expect(tokens[0]).not.toBe(tokens[1]);
        await all.release();
      } finally {
        await Promise.all([a.close(), b.close()]);
        client.disconnect();
        raw.disconnect();
      }
    });
  });
});
