/**
 * Multi-locks across processes on one redis-server: workers taking random overlapping key sets
 * never hold overlapping sets at once and never hold only part of a set; a worker killed with
 * SIGKILL while holding several keys gives them all back by their TTL.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocks } from '../../src/index.js';
import { uniquePrefix } from '../helpers/harness.js';
import { RedisServer } from '../helpers/redis-server.js';

const WORKER = new URL('../helpers/multi-worker.mjs', import.meta.url).pathname;
let server: RedisServer;
let url: string;

beforeAll(async () => {
  server = await RedisServer.start();
  url = `redis://127.0.0.1:${server.port}`;
});
afterAll(async () => server.stop());

function worker(args: string[]): { lines: string[]; done: Promise<void>; child: ReturnType<typeof spawn> } {
  const child = spawn(process.execPath, [WORKER, url, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  const lines: string[] = [];
  createInterface({ input: child.stdout! }).on('line', (line) => lines.push(line));
  const done = once(child, 'exit').then(([code]) => {
    if (code !== 0) throw new Error(`worker exited with ${String(code)}`);
  });
  done.catch(() => {}); // a worker killed on purpose is never awaited; the others are
  return { lines, done, child };
}

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
});
