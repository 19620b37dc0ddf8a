// Redlock over five independent masters, latchkey next to the peers that implement it, on five
// private redis-servers:
//   (a) acquire+release latency, sequential, on one node (each library's single-node API) and
//       on five (its quorum API), interleaved in 250 ms slices: p50, p99 and the 5-node /
//       1-node ratio;
//   (b) two of five masters hung (SIGSTOP): time per acquire+release, over a few calls;
//   (c) three of five hung: what one acquire does within 10 s (rejects, resolves, hangs), and
//       whether keys are left behind on the nodes once they resume.
// Pass (a) also measures the floors under the ratios, on the same nodes and clients: two PINGs
// sent to every node and done when a majority answered, and the smallest lock with latchkey's
// fence guarantee (lib/floor-locks.mjs, as bench/floors.mjs), so that a library's 5 / 1 ratio can
// be read against what a round trip to a majority costs on this machine in the same run.
// Usage: npm run bench (after bench/run.mjs), or node bench/quorum.mjs after npm run build.
// Env: BENCH_SECONDS (default 10) for each latency pass (a), BENCH_WARMUP_MS (default 1000) of
// untimed pairs per library and node count before it, BENCH_ONLY=substr[,substr],
// LATCHKEY_DIST (another build's dist/index.js, inside the repository, to compare builds),
// BENCH_CLIENTS=6|5 (the ioredis major every library gets: lib/clients.mjs, 6 by default).
import { createRequire } from 'node:module';
import { writeFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CLIENTS, clientsLine, importIoredis } from './lib/clients.mjs';
import { startRedisServer } from './lib/redis-server.mjs';
import { summarize } from './lib/stats.mjs';
import { latchkeyModule } from './lib/latchkey-module.mjs';
import { defineSmallestLock, smallestLock, twoPings } from './lib/floor-locks.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
const { Redis } = await importIoredis();
const SECONDS = Number(process.env.BENCH_SECONDS || 10);
const TTL = 10_000;
const CAP_MS = 10_000; // longest wait for one acquire+release with 2 of 5 hung
const HUNG3_CAP_MS = 15_000; // with 3 of 5 hung: past every library's default wait (latchkey's is 10 s)
const log = (...args) => process.stderr.write(`${args.join(' ')}\n`);

/** Each library: its single-node lock and its quorum lock over `clients`, both with its defaults. */
const LIBRARIES = [
  {
    name: 'latchkey',
    async make(clients) {
      const { createLocks } = await import(latchkeyModule());
      const locks = clients.length === 1 ? createLocks({ redis: clients[0], prefix: 'q:' }) : createLocks({ redlock: clients, prefix: 'q:' });
      return { acquire: (key) => locks.acquire(key, { ttl: TTL }), release: (lease) => lease.release(), close: () => locks.close() };
    },
  },
  {
    name: 'redlock-v4',
    async make(clients) {
      const Redlock = require('redlock-v4');
      const redlock = new Redlock(clients);
      redlock.on('clientError', () => {});
      return { acquire: (key) => redlock.lock(key, TTL), release: (lock) => lock.unlock(), close: async () => {} };
    },
  },
  {
    name: 'redlock-v5',
    async make(clients) {
      const Redlock = require('redlock-v5').default;
      const redlock = new Redlock(clients);
      redlock.on('error', () => {});
      return { acquire: (key) => redlock.acquire([key], TTL), release: (lock) => lock.release(), close: async () => {} };
    },
  },
  {
    name: 'sesamecare-redlock',
    async make(clients) {
      const { Redlock } = await import('@sesamecare-oss/redlock');
      const redlock = new Redlock(clients);
      redlock.on('error', () => {});
      return { acquire: (key) => redlock.acquire([key], TTL), release: (lock) => lock.release(), close: async () => {} };
    },
  },
  {
    name: 'redlock-universal',
    async make(clients) {
      const { createLock, createRedlock, IoredisAdapter } = await import('redlock-universal');
      const adapters = clients.map((c) => new IoredisAdapter(c));
      const lockFor = (key) => (clients.length === 1 ? createLock({ adapter: adapters[0], key, ttl: TTL }) : createRedlock({ adapters, key, ttl: TTL }));
      return {
        async acquire(key) {
          const lock = lockFor(key);
          return { lock, handle: await lock.acquire() };
        },
        release: ({ lock, handle }) => lock.release(handle),
        close: async () => {},
      };
    },
  },
  {
    name: 'redis-semaphore',
    async make(clients) {
      const { Mutex, RedlockMutex } = await import('redis-semaphore');
      return {
        async acquire(key) {
          const mutex = clients.length === 1 ? new Mutex(clients[0], key, { lockTimeout: TTL }) : new RedlockMutex(clients, key, { lockTimeout: TTL });
          await mutex.acquire();
          return mutex;
        },
        release: (mutex) => mutex.release(),
        close: async () => {},
      };
    },
  },
];

/** The floors: latency pass (a) only, `floor: true`. */
const FLOORS = [
  {
    name: 'floor: 2 x PING to a majority',
    floor: true,
    async make(clients) {
      return { acquire: () => twoPings(clients), release: async () => {}, close: async () => {} };
    },
  },
  {
    name: 'floor: smallest lock with a clock fence',
    floor: true,
    async make(clients) {
      for (const c of clients) defineSmallestLock(c);
      return { acquire: (key) => smallestLock(clients, key, 'clock-fenced'), release: (release) => release(), close: async () => {} };
    },
  },
];
LIBRARIES.push(...FLOORS);

const only = (process.env.BENCH_ONLY ?? '').split(',').map((s) => s.trim()).filter(Boolean);
const wanted = only.length ? LIBRARIES.filter((l) => only.some((s) => l.name.includes(s))) : LIBRARIES;

/** Resolves to { ok, value | error, ms }, or { hung: true, late, ms } when the call has not settled within `cap` ms (`late`: its outcome, when it comes). */
async function timed(call, cap = CAP_MS) {
  const t = performance.now();
  let timer;
  const settled = call().then(
    (value) => ({ ok: true, value }),
    (error) => ({ ok: false, error }),
  );
  const outcome = await Promise.race([settled, new Promise((resolve) => (timer = setTimeout(() => resolve({ hung: true, late: settled }), cap)))]);
  clearTimeout(timer);
  return { ...outcome, ms: performance.now() - t };
}

/**
 * Sequential acquire+release pairs on one node and on five, `seconds` each, interleaved in slices
 * of SLICE_MS: a noisy neighbour then slows both alike, and the ratio stays meaningful.
 */
const SLICE_MS = 250;
const WARMUP_MS = Number(process.env.BENCH_WARMUP_MS || 1000);
async function latencies(single, five, name, seconds) {
  const runs = [
    { lib: single, key: `bench:q:${name}:one`, samples: [] },
    { lib: five, key: `bench:q:${name}:five`, samples: [] },
  ];
  // Warm-up: WARMUP_MS of pairs each, so that V8 has optimized every library's code before it is
  // timed (50 pairs left latchkey's, the most code, to be compiled inside the first slices).
  for (const r of runs) {
    const warm = performance.now() + WARMUP_MS;
    while (performance.now() < warm) await r.lib.release(await r.lib.acquire(r.key));
  }
  const slices = Math.max(1, Math.round((seconds * 1000) / SLICE_MS));
  for (let i = 0; i < slices; i++) {
    for (const r of i % 2 === 0 ? runs : [...runs].reverse()) {
      const end = performance.now() + SLICE_MS;
      while (performance.now() < end) {
        const t = performance.now();
        await r.lib.release(await r.lib.acquire(r.key));
        r.samples.push(performance.now() - t);
      }
    }
  }
  return runs.map((r) => summarize(r.samples));
}

function connect(server) {
  const client = new Redis(server.port, '127.0.0.1', { maxRetriesPerRequest: 1 });
  client.on('error', () => {});
  return client;
}

/** Lock keys (not latchkey's fence counters, which outlive leases by design) matching `pattern`, over all nodes. */
async function keysLeft(clients, pattern) {
  const lists = await Promise.all(clients.map((c) => c.keys(pattern).catch(() => [])));
  return lists.flat().filter((k) => !/:(fence|queue|alive)$/.test(k)).length;
}

const describeError = (error) => String(error?.message ?? error).replace(/\s+/g, ' ').slice(0, 90);

async function main() {
  log(`[quorum] ${clientsLine(['ioredis'])}`);
  const servers = await Promise.all(Array.from({ length: 5 }, () => startRedisServer()));
  const rows = [];
  try {
    for (const def of wanted) {
      log(`[quorum] ${def.name}`);
      const clients = servers.map(connect);
      const admin = servers.map(connect);
      const row = { library: def.name };
      try {
        await measure(def, servers, clients, admin, row);
      } catch (error) {
        row.error = describeError(error);
        log(`  error: ${row.error}`);
      } finally {
        for (const s of servers) s.resume();
        for (const c of [...clients, ...admin]) c.disconnect();
      }
      rows.push(row);
    }
  } finally {
    await Promise.all(servers.map((s) => s.stop()));
  }
  report(rows);
  process.exit(0); // a peer's hung promise may hold timers open
}

/** One library's passes (a), (b) and (c), its figures written to `row`. */
async function measure(def, servers, clients, admin, row) {
  const single = await def.make([clients[0]]);
  const five = await def.make(clients);
  [row.one, row.five] = await latencies(single, five, def.name, SECONDS);
  log(`  1 node p50 ${row.one.p50.toFixed(3)} ms, 5 nodes p50 ${row.five.p50.toFixed(3)} ms`);
  if (def.floor) return;

  // (b) two of five hung.
  servers[3].pause();
  servers[4].pause();
  const hung2 = [];
  for (let i = 0; i < 5; i++) {
    const pair = await timed(async () => five.release(await five.acquire(`bench:q:${def.name}:hung2`)));
    hung2.push(pair);
    if (pair.hung) break;
  }
  row.hung2 = hung2;
  log(`  2 of 5 hung: ${hung2.map((p) => (p.hung ? 'hung' : p.ok ? `${p.ms.toFixed(0)} ms` : `error after ${p.ms.toFixed(0)} ms`)).join(', ')}`);

  // (c) three of five hung.
  servers[2].pause();
  const one = await timed(() => five.acquire(`bench:q:${def.name}:hung3`), HUNG3_CAP_MS);
  row.hung3 = {
    ms: one.ms,
    outcome: one.hung ? `still pending after ${HUNG3_CAP_MS / 1000} s` : one.ok ? 'resolved with a lock' : `rejected: ${describeError(one.error)}`,
  };
  if (one.ok) five.release(one.value).catch(() => {});
  // An acquire still pending at the cap may win once the nodes resume: released then, or a
  // library that renews its locks by itself (redis-semaphore) keeps renewing it and throws from
  // its timer when the key is gone later in the run (seen: LostLockError ended a run).
  if (one.hung) void one.late.then((o) => o.ok && five.release(o.value).catch(() => {}));
  for (const s of servers) s.resume();
  await new Promise((r) => setTimeout(r, 1500)); // the hung nodes work through their queues
  row.keysLeft = await keysLeft(admin, `*${def.name}:hung*`);
  log(`  3 of 5 hung: ${row.hung3.outcome} (${one.ms.toFixed(0)} ms); keys left after resume: ${row.keysLeft}`);
  await Promise.race([Promise.all([single.close(), five.close()]), new Promise((r) => setTimeout(r, 1000))]);
}

function report(rows) {
  const f = (n) => n.toFixed(3);
  console.log(`\n### 5. Redlock over 5 independent masters (sequential acquire+release, defaults; ${SECONDS} s per pass)\n`);
  console.log(`${clientsLine(['ioredis'])}, for every library\n`);
  console.log('| library | 1 node p50 ms | 5 nodes p50 ms | p50 ratio | 1 node p99 ms | 5 nodes p99 ms | p99 ratio | 2 of 5 hung: each acquire+release (cap 10 s) | 3 of 5 hung: one acquire (cap 15 s) | lock keys left after resume |');
  console.log('|---|--:|--:|--:|--:|--:|--:|---|---|--:|');
  for (const r of rows) {
    if (r.error) {
      console.log(`| ${r.library} | error: ${r.error} |${' |'.repeat(8)}`);
      continue;
    }
    const latency = `${f(r.one.p50)} | ${f(r.five.p50)} | ${(r.five.p50 / r.one.p50).toFixed(2)} | ${f(r.one.p99)} | ${f(r.five.p99)} | ${(r.five.p99 / r.one.p99).toFixed(2)}`;
    // A floor has the latency pass (a) only.
    const hung = r.hung2
      ? `${r.hung2.map((p) => (p.hung ? 'never returns' : `${p.ok ? '' : 'error '}${p.ms.toFixed(0)} ms`)).join(', ')} | ${r.hung3.outcome}, ${r.hung3.ms.toFixed(0)} ms | ${r.keysLeft}`
      : ' | | ';
    console.log(`| ${r.library} | ${latency} | ${hung} |`);
  }
  mkdirSync(path.join(here, 'results'), { recursive: true });
  const meta = { date: new Date().toISOString(), node: process.version, seconds: SECONDS, clients: { major: CLIENTS.major, ioredis: CLIENTS.ioredis }, latchkey: process.env.LATCHKEY_DIST ?? 'dist/' };
  writeFileSync(path.join(here, 'results', 'quorum-latest.json'), JSON.stringify({ meta, rows }, null, 2));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
