// The waiting side of a hand-off, hot, in one process: how long a lock takes from its grant's
// 'message' event on the subscriber connection to the acquire() it resolves, when the code runs
// again and again with nothing else between (bench/trace-handoff.mjs measures the same phase
// across 8 processes, where each wake-up finds its caches cold). Two sides take turns on one
// key: A holds, B queues (its attempt answered busy), A releases, B's grant arrives; then the
// other way round. Rows: `scripts` (latchkey's acquire.lua and release.lua through ioredis with
// nothing around them: lib/ring.mjs, joinScripts) and `latchkey` (two managers), alternating,
// ROUNDS rounds (default 3) of HANDOFFS hand-offs each (default 3000). It prints p10, p50 and p90
// in µs per row (medians over the rounds) and latchkey's p50 over the scripts' p50 of the same
// round (median). A hand-off that came without a message (B's attempt found the lock already
// free) is not counted; n says how many were.
// Usage: npm run build && node bench/grant-path.mjs
//        LATCHKEY_DIST=bench/dist-a/index.js node bench/grant-path.mjs  (another build)
import { clientsLine, importIoredis } from './lib/clients.mjs';
import { latchkeyModule } from './lib/latchkey-module.mjs';
import { startRedisServer } from './lib/redis-server.mjs';
import { joinScripts } from './lib/ring.mjs';
import { median, percentile, sorted } from './lib/stats.mjs';
import { onSubscriberMessages } from './lib/subscriber-messages.mjs';

const ROUNDS = Number(process.env.ROUNDS || 3);
const HANDOFFS = Number(process.env.HANDOFFS || 3000);

const { Redis } = await importIoredis();
let lastMessage = 0;
onSubscriberMessages(Redis, () => (lastMessage = performance.now()));
// Marks (as in trace-handoff.mjs): a build whose code calls `globalThis.__latchkeyMark?.('name')`
// (a copy with calls added by hand, never committed) gets each mark's p50 after the message event.
let marks = [];
const markTimes = new Map();
globalThis.__latchkeyMark = (name) => marks.push(name, performance.now());

/** B's attempt reaches Redis and is answered (busy) before A releases: a timer turn and an I/O turn. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 0)).then(() => new Promise((resolve) => setImmediate(resolve)));

/** `HANDOFFS` hand-offs between the two sides of `pair` (each with acquire() and release(held)); the windows in µs. */
async function handOffs(pair) {
  const windows = [];
  let held = await pair[0].acquire();
  for (let k = 0; k < HANDOFFS; k++) {
    const [from, to] = k % 2 === 0 ? pair : [pair[1], pair[0]];
    lastMessage = 0;
    let at = 0;
    // Timed when it resolves, not when this loop goes on: that waits for the release's reply too.
    const next = to.acquire().then((lease) => {
      at = performance.now();
      return lease;
    });
    await settle();
    await from.release(held);
    held = await next;
    if (lastMessage > 0) {
      windows.push((at - lastMessage) * 1000);
      for (let m = 0; m < marks.length; m += 2) {
        if (marks[m + 1] < lastMessage || marks[m + 1] > at) continue;
        if (!markTimes.has(marks[m])) markTimes.set(marks[m], []);
        markTimes.get(marks[m]).push((marks[m + 1] - lastMessage) * 1000);
      }
    }
    marks = [];
  }
  await pair[HANDOFFS % 2].release(held);
  return windows;
}

async function scriptsPair(port) {
  const clients = [new Redis(port, '127.0.0.1'), new Redis(port, '127.0.0.1')];
  await clients[0].del('scripts', 'scripts:queue', 'scripts:alive');
  const sides = await Promise.all(clients.map((c, i) => joinScripts(c, i)));
  return {
    pair: sides.map((s) => ({ acquire: () => s.acquire(), release: () => s.release() })),
    close: () => {
      for (const s of sides) s.leave();
      for (const c of clients) c.disconnect();
    },
  };
}

async function latchkeyPair(port, round) {
  const { createLocks } = await import(latchkeyModule());
  const clients = [new Redis(port, '127.0.0.1'), new Redis(port, '127.0.0.1')];
  const managers = clients.map((redis) => createLocks({ redis, prefix: `grant-path:${round}:` }));
  return {
    pair: managers.map((m) => ({ acquire: () => m.acquire('k', { ttl: 10_000 }), release: (lease) => lease.release() })),
    close: async () => {
      await Promise.all(managers.map((m) => m.close()));
      for (const c of clients) c.disconnect();
    },
  };
}


console.log(clientsLine(['ioredis']));
const server = await startRedisServer();
const rows = { scripts: [], latchkey: [] };
try {
  for (let round = 0; round < ROUNDS; round++) {
    for (const kind of Object.keys(rows)) {
      const { pair, close } = kind === 'scripts' ? await scriptsPair(server.port) : await latchkeyPair(server.port, round);
      const windows = sorted(await handOffs(pair));
      await close();
      rows[kind].push({ n: windows.length, p10: percentile(windows, 10), p50: percentile(windows, 50), p90: percentile(windows, 90) });
      const r = rows[kind].at(-1);
      console.error(`${kind.padEnd(9)} round ${round + 1}: n ${r.n}  p10 ${r.p10.toFixed(1)}  p50 ${r.p50.toFixed(1)}  p90 ${r.p90.toFixed(1)} µs`);
    }
  }
} finally {
  await server.stop();
}
const ratio = median(rows.latchkey.map((r, i) => r.p50 / rows.scripts[i].p50));
console.log(`| 'message' -> acquire() resolved, one process, medians of ${ROUNDS} rounds | n | p10 µs | p50 µs | p90 µs | p50 / scripts |`);
console.log('| --- | --: | --: | --: | --: | --: |');
for (const [kind, rs] of Object.entries(rows)) {
  const m = (f) => median(rs.map(f)).toFixed(1);
  console.log(`| ${kind} | ${median(rs.map((r) => r.n))} | ${m((r) => r.p10)} | ${m((r) => r.p50)} | ${m((r) => r.p90)} | ${kind === 'scripts' ? '1.00' : ratio.toFixed(2)} |`);
}
if (markTimes.size > 0) {
  console.log('\n| mark (after the message event), µs | n | p50 |\n| --- | --: | --: |');
  const byMedian = [...markTimes].map(([name, times]) => [name, times.length, median(times)]).sort((a, b) => a[2] - b[2]);
  for (const [name, n, p50] of byMedian) console.log(`| ${name} | ${n} | ${p50.toFixed(1)} |`);
}
