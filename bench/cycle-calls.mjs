// Every JavaScript function call of a whole contended cycle (an acquire answered busy, the grant,
// the release that hands the lock on), counted per hand-off by origin: the lock's own code,
// ioredis, Node's, for latchkey's scripts alone (lib/ring.mjs, joinScripts) and for latchkey (two
// managers), in one process, as bench/grant-calls.mjs runs them (two sides take turns on one key).
// V8's precise coverage counts the calls (no sampling, no timing): the figure barely moves from run
// to run, on a quiet machine or a busy one (a few tenths, where a hand-off's path depends on which
// of two replies is read first). What it is for: in a process's first seconds V8 runs
// that code unoptimized, and a hand-off then costs about in proportion to the calls it makes
// (bench/README.md, "The hand-off floor"); bench/grant-calls.mjs lists the grant's own calls in order.
// Usage: npm run build && node bench/cycle-calls.mjs [top]   (top: latchkey's busiest modules, default 25)
//        LATCHKEY_DIST=bench/dist-a/index.js node bench/cycle-calls.mjs  (another build)
import { readFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { clientsLine, importIoredis } from './lib/clients.mjs';
import { openPair, takeTurns } from './lib/grant-pair.mjs';
import { latchkeyModule } from './lib/latchkey-module.mjs';
import { startRedisServer } from './lib/redis-server.mjs';

const HANDOFFS = Number(process.env.HANDOFFS || 400);
const TOP = Number(process.argv[2] ?? 25);

/** Where a function's code comes from. */
function origin(url) {
  if (url.includes('/dist/') || url.includes('/dist-')) return 'lock';
  if (url.endsWith('/grant-pair.mjs') || url.endsWith('/cycle-calls.mjs')) return 'harness'; // the turns, the same for both rows
  if (url.includes('/bench/')) return 'lock'; // the scripts row's client (lib/ring.mjs)
  if (url.includes('node_modules/ioredis')) return 'ioredis';
  if (url.startsWith('node:')) return 'node';
  return 'other';
}

/** Calls per hand-off by origin, and per function, over `count` hand-offs of `pair`. */
async function countCalls(session, pair, count) {
  await takeTurns(pair, 40); // the first calls of each function (compilation, caches) left out
  await session.post('Profiler.takePreciseCoverage'); // the counters start from 0
  await takeTurns(pair, count);
  const { result } = await session.post('Profiler.takePreciseCoverage');
  const byOrigin = { lock: 0, ioredis: 0, node: 0, harness: 0, other: 0 };
  const functions = [];
  for (const script of result) {
    const from = origin(script.url);
    for (const f of script.functions) {
      const calls = f.ranges[0].count / count;
      if (calls === 0) continue;
      byOrigin[from] += calls;
      if (from === 'lock') functions.push({ name: f.functionName || '(anonymous)', file: script.url.split('/').slice(-2).join('/'), offset: f.ranges[0].startOffset, calls });
    }
  }
  return { byOrigin, functions: functions.sort((a, b) => b.calls - a.calls) };
}

console.log(clientsLine(['ioredis']));
const { Redis } = await importIoredis();
const server = await startRedisServer();
const session = new Session();
session.connect();
await session.post('Profiler.enable');
await session.post('Profiler.startPreciseCoverage', { callCount: true, detailed: false });
const rows = {};
try {
  for (const kind of ['scripts', 'latchkey']) {
    const { pair, close } = await openPair(Redis, kind, server.port, 'cycle-calls:');
    rows[kind] = await countCalls(session, pair, HANDOFFS);
    await close();
  }
} finally {
  await session.post('Profiler.stopPreciseCoverage');
  session.disconnect();
  await server.stop();
}
const fmt = (n) => n.toFixed(1);
console.log(`| calls per hand-off (${HANDOFFS} hand-offs, one process) | the lock's own | ioredis | Node | the turns' | all |`);
console.log('| --- | --: | --: | --: | --: | --: |');
for (const [kind, { byOrigin: o }] of Object.entries(rows)) {
  console.log(`| ${kind} | ${fmt(o.lock)} | ${fmt(o.ioredis)} | ${fmt(o.node)} | ${fmt(o.harness)} | ${fmt(o.lock + o.ioredis + o.node + o.harness + o.other)} |`);
}
// The build names each module it bundles in a comment ("// src/wait/waiter.ts"): latchkey's calls by module.
const build = readFileSync(new URL(latchkeyModule(), import.meta.url), 'utf8');
const modules = [...build.matchAll(/^\/\/ (src\/\S+)$/gm)].map((m) => [m.index, m[1]]);
const moduleAt = (offset) => modules.findLast(([at]) => at <= offset)?.[1] ?? '(the build)';
const byModule = new Map();
for (const f of rows.latchkey.functions) {
  const m = f.file.startsWith('dist') ? moduleAt(f.offset) : f.file;
  const entry = byModule.get(m) ?? { calls: 0, names: [] };
  entry.calls += f.calls;
  entry.names.push(`${f.name} ${fmt(f.calls)}`);
  byModule.set(m, entry);
}
console.log(`\nlatchkey's calls per hand-off by module, its ${TOP} busiest (each function's calls after its name):`);
for (const [m, { calls, names }] of [...byModule].sort((a, b) => b[1].calls - a[1].calls).slice(0, TOP)) {
  console.log(`${fmt(calls).padStart(6)}  ${m}: ${names.join(', ')}`);
}
