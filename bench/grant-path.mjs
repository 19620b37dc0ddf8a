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
//        LATCHKEY_DIST=dist/index.js,bench/dist-a/index.js node bench/grant-path.mjs  (builds side by
//        side: a row each, in turn in every round, each over the scripts' p50 of its round)
//        node --no-opt bench/grant-path.mjs  (V8's optimizer off: the code a process runs in its
//        first seconds, before V8 optimizes it; steadier from run to run than bench/trace-handoff.mjs)
import { clientsLine, importIoredis } from './lib/clients.mjs';
import { openPair, takeTurns } from './lib/grant-pair.mjs';
import { startRedisServer } from './lib/redis-server.mjs';
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

/** `HANDOFFS` hand-offs between the two sides of `pair`; the windows in µs. */
async function handOffs(pair) {
  const windows = [];
  let at = 0;
  await takeTurns(pair, HANDOFFS, {
    before: () => {
      lastMessage = 0;
      at = 0;
    },
    resolved: () => (at = performance.now()),
    after: () => {
      if (lastMessage > 0) {
        windows.push((at - lastMessage) * 1000);
        for (let m = 0; m < marks.length; m += 2) {
          if (marks[m + 1] < lastMessage || marks[m + 1] > at) continue;
          if (!markTimes.has(marks[m])) markTimes.set(marks[m], []);
          markTimes.get(marks[m]).push((marks[m + 1] - lastMessage) * 1000);
        }
      }
      marks = [];
    },
  });
  return windows;
}

console.log(clientsLine(['ioredis']));
const server = await startRedisServer();
// One latchkey row per build of LATCHKEY_DIST (comma-separated; lib/latchkey-module.mjs reads it at each openPair).
const builds = (process.env.LATCHKEY_DIST ?? '').split(',').filter(Boolean);
const latchkeyRows = builds.length > 1 ? builds.map((build) => [`latchkey ${build}`, build]) : [['latchkey', builds[0]]];
const builtFrom = new Map(latchkeyRows);
const rows = { scripts: [], ...Object.fromEntries(latchkeyRows.map(([row]) => [row, []])) };
try {
  for (let round = 0; round < ROUNDS; round++) {
    for (const row of Object.keys(rows)) {
      const kind = row === 'scripts' ? row : 'latchkey';
      if (builtFrom.get(row) === undefined) delete process.env.LATCHKEY_DIST;
      else process.env.LATCHKEY_DIST = builtFrom.get(row);
      const { pair, close } = await openPair(Redis, kind, server.port, `grant-path:${round}:`);
      const windows = sorted(await handOffs(pair));
      await close();
      rows[row].push({ n: windows.length, p10: percentile(windows, 10), p50: percentile(windows, 50), p90: percentile(windows, 90) });
      const r = rows[row].at(-1);
      console.error(`${row.padEnd(9)} round ${round + 1}: n ${r.n}  p10 ${r.p10.toFixed(1)}  p50 ${r.p50.toFixed(1)}  p90 ${r.p90.toFixed(1)} µs`);
    }
  }
} finally {
  await server.stop();
}
console.log(`| 'message' -> acquire() resolved, one process, medians of ${ROUNDS} rounds | n | p10 µs | p50 µs | p90 µs | p50 / scripts |`);
console.log('| --- | --: | --: | --: | --: | --: |');
for (const [row, rs] of Object.entries(rows)) {
  const m = (f) => median(rs.map(f)).toFixed(1);
  const ratio = median(rs.map((r, i) => r.p50 / rows.scripts[i].p50));
  console.log(`| ${row} | ${median(rs.map((r) => r.n))} | ${m((r) => r.p10)} | ${m((r) => r.p50)} | ${m((r) => r.p90)} | ${ratio.toFixed(2)} |`);
}
if (markTimes.size > 0) {
  console.log('\n| mark (after the message event), µs | n | p50 |\n| --- | --: | --: |');
  const byMedian = [...markTimes].map(([name, times]) => [name, times.length, median(times)]).sort((a, b) => a[2] - b[2]);
  for (const [name, n, p50] of byMedian) console.log(`| ${name} | ${n} | ${p50.toFixed(1)} |`);
}
