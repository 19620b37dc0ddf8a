// Counting semaphores: latchkey's locks.semaphore next to redis-semaphore's Semaphore, on one
// private redis-server, in one process, each with its defaults. Passes of the two libraries
// alternate (a noisy neighbour slows both alike).
//   (a) free: limit 64, 64 concurrent loops of acquire+release: pairs per second and Redis round
//       trips per pair;
//   (b) contended: limit 4, 32 concurrent loops that each hold a permit for 1 ms of awaited work:
//       acquisitions per second, p99 wait inside acquire, the most holders seen at once (must not
//       pass the limit), Jain's fairness index over the loops, round trips per acquisition.
// Usage: npm run bench (after the other scripts), or node bench/semaphore.mjs after npm run build.
// Env: BENCH_SECONDS (default 10): seconds per library per scenario, in 3 alternating passes;
// BENCH_CLIENTS=6|5: the ioredis major both libraries get (lib/clients.mjs, 6 by default);
// LATCHKEY_DIST: another build of latchkey. Results also go to bench/results/semaphore-latest.json.
import { mkdirSync, writeFileSync } from 'node:fs';
import { Semaphore } from 'redis-semaphore';
import { CLIENTS, clientsLine, importIoredis } from './lib/clients.mjs';
import { diffCounts, startCountingProxy } from './lib/proxy.mjs';
import { startRedisServer } from './lib/redis-server.mjs';
import { latchkeyModule } from './lib/latchkey-module.mjs';
import { jain, summarize } from './lib/stats.mjs';

const { Redis } = await importIoredis();
const SECONDS = Number(process.env.BENCH_SECONDS || 10);
const PASSES = 3;
const log = (...args) => process.stderr.write(`${args.join(' ')}\n`);

const LIBRARIES = {
  async latchkey(client, name, limit) {
    const { createLocks } = await import(latchkeyModule());
    const locks = createLocks({ redis: client, prefix: 'bsem:' });
    const sem = locks.semaphore(name, { limit, ttl: 10_000, wait: 60_000 });
    return { acquire: () => sem.acquire(), release: (lease) => lease.release(), close: () => locks.close() };
  },
  async 'redis-semaphore'(client, name, limit) {
    // One Semaphore object per acquisition, as its README does; lockTimeout 10 s like latchkey's TTL.
    const options = { lockTimeout: 10_000, acquireTimeout: 60_000 };
    return {
      acquire: async () => {
        const s = new Semaphore(client, `rsem:${name}`, limit, options);
        await s.acquire();
        return s;
      },
      release: (s) => s.release(),
      close: async () => {},
    };
  },
};

const RT_MS = 1000; // the round-trip pass, through a counting proxy (which slows it: not timed)

/** `loops` concurrent loops for `ms`; `hold` ms of awaited work inside. */
async function pass(lib, { loops, ms, hold }) {
  const end = performance.now() + ms;
  const perLoop = new Array(loops).fill(0);
  const waits = [];
  let inside = 0;
  let most = 0;
  await Promise.all(
    perLoop.map(async (_, i) => {
      while (performance.now() < end) {
        const t = performance.now();
        const permit = await lib.acquire();
        waits.push(performance.now() - t);
        inside++;
        most = Math.max(most, inside);
        if (hold > 0) await new Promise((r) => setTimeout(r, hold));
        inside--;
        await lib.release(permit);
        perLoop[i]++;
      }
    }),
  );
  return { perLoop, waits, most };
}

const SCENARIOS = [
  { key: 'free', title: '(a) free: limit 64, 64 loops, acquire+release', limit: 64, loops: 64, hold: 0 },
  { key: 'contended', title: '(b) contended: limit 4, 32 loops, 1 ms hold', limit: 4, loops: 32, hold: 1 },
];

async function main() {
  log(`[semaphore] ${clientsLine(['ioredis'])}`);
  const server = await startRedisServer();
  const client = new Redis(server.port, '127.0.0.1');
  const proxy = await startCountingProxy(server.port);
  const results = {};
  try {
    for (const sc of SCENARIOS) {
      const libs = {};
      for (const [name, make] of Object.entries(LIBRARIES)) libs[name] = await make(client, sc.key, sc.limit);
      const totals = Object.fromEntries(Object.keys(libs).map((n) => [n, { count: 0, ms: 0, calls: 0, perLoop: new Array(sc.loops).fill(0), waits: [], most: 0 }]));
      for (let p = 0; p < PASSES; p++) {
        const order = p % 2 === 0 ? Object.keys(libs) : Object.keys(libs).reverse();
        for (const name of order) {
          const t = performance.now();
          const r = await pass(libs[name], { loops: sc.loops, ms: (SECONDS * 1000) / PASSES, hold: sc.hold });
          const elapsed = performance.now() - t;
          const tot = totals[name];
          const count = r.perLoop.reduce((a, b) => a + b, 0);
          tot.count += count;
          tot.ms += elapsed;
          r.perLoop.forEach((c, i) => (tot.perLoop[i] += c));
          for (const w of r.waits) tot.waits.push(w);
          tot.most = Math.max(tot.most, r.most);
          log(`[semaphore] ${sc.key} pass ${p + 1} ${name}: ${Math.round((count / elapsed) * 1000)}/s, most at once ${r.most}`);
        }
      }
      for (const l of Object.values(libs)) await l.close();
      // Round trips: commands sent per acquisition, counted by a proxy, in a pass of their own.
      for (const [name, make] of Object.entries(LIBRARIES)) {
        const proxied = new Redis(proxy.port, '127.0.0.1');
        const lib = await make(proxied, `${sc.key}:rt`, sc.limit);
        const before = proxy.snapshot();
        const r = await pass(lib, { loops: sc.loops, ms: RT_MS, hold: sc.hold });
        const sent = diffCounts(before, proxy.snapshot());
        await lib.close();
        proxied.disconnect();
        totals[name].calls = sent.total / r.perLoop.reduce((a, b) => a + b, 0);
      }
      results[sc.key] = Object.fromEntries(
        Object.entries(totals).map(([name, t]) => [
          name,
          { perSecond: (t.count / t.ms) * 1000, roundTrips: t.calls, wait: summarize(t.waits), most: t.most, jain: jain(t.perLoop) },
        ]),
      );
    }
  } finally {
    client.disconnect();
    await proxy.close();
    await server.stop();
  }

  console.log(`\n### 6. Counting semaphores (one process, ${SECONDS} s per library per scenario, ${PASSES} alternating passes)\n`);
  console.log(`${clientsLine(['ioredis'])}, for both libraries\n`);
  console.log('| scenario | library | per second | ratio | round trips each | p99 wait ms | most holders at once | Jain |');
  console.log('|---|---|--:|--:|--:|--:|--:|--:|');
  for (const sc of SCENARIOS) {
    const r = results[sc.key];
    const peer = r['redis-semaphore'].perSecond;
    for (const [name, x] of Object.entries(r)) {
      console.log(
        `| ${sc.title} | ${name} | ${Math.round(x.perSecond)} | ${(x.perSecond / peer).toFixed(2)} | ${x.roundTrips.toFixed(2)} | ${x.wait.p99.toFixed(1)} | ${x.most} of ${sc.limit} | ${x.jain.toFixed(3)} |`,
      );
    }
  }
  const resultsDir = new URL('./results/', import.meta.url);
  mkdirSync(resultsDir, { recursive: true });
  const meta = { date: new Date().toISOString(), node: process.version, seconds: SECONDS, passes: PASSES, clients: { major: CLIENTS.major, ioredis: CLIENTS.ioredis }, latchkey: process.env.LATCHKEY_DIST ?? 'dist/' };
  writeFileSync(new URL('semaphore-latest.json', resultsDir), `${JSON.stringify({ meta, results }, null, 2)}\n`);
}

await main();
