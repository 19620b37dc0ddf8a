// Side-by-side benchmark of latchkey and its peer libraries on one private redis-server.
// Usage: npm run bench   (= npm run build && node bench/run.mjs)
// Env: BENCH_SECONDS (default 10) per timing pass, BENCH_RT_SECONDS (default 3) per round-trip
// pass, BENCH_ONLY=substr[,substr] to pick libraries/variants, BENCH_SCENARIO=name[,name],
// BENCH_CLIENTS=6|5 for the client majors (lib/clients.mjs; 6 by default), BENCH_REPEAT (default
// 1) passes of every row, alternating in order, each figure the median of its row's passes.
// Tables go to stdout, progress to stderr, everything to bench/results/latest.json.
// See bench/README.md for what each figure means.
// The scenarios themselves are in lib/scenarios.mjs, the worker processes' plumbing in
// lib/workers.mjs; this file picks the rows, runs them and reports.
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CLIENTS, clientLabel, clientsLine, importIoredis } from './lib/clients.mjs';
import { startCountingProxy } from './lib/proxy.mjs';
import { startRedisServer } from './lib/redis-server.mjs';
import {
  CONTENDERS,
  HOLD_CAP_SECONDS,
  RT_SECONDS,
  RUNNERS,
  SECONDS,
  setScenarioEnv,
  TASKS,
  WAITER_PROCESSES,
  WAITERS_PER_PROCESS,
} from './lib/scenarios.mjs';
import { liveChildren } from './lib/workers.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..');

// ---------------------------------------------------------------------------------------------
// Settings

const ADAPTERS = [
  { adapter: 'latchkey', pkg: null, variants: ['default', 'backoff'] },
  { adapter: 'redlock-v4', pkg: 'redlock-v4', variants: ['default', 'fast'] },
  { adapter: 'redlock-v5', pkg: 'redlock-v5', variants: ['default', 'fast'] },
  { adapter: 'sesamecare-redlock', pkg: '@sesamecare-oss/redlock', variants: ['default', 'fast'] },
  { adapter: 'redlock-universal', pkg: 'redlock-universal', variants: ['default', 'fast'] },
  { adapter: 'redis-semaphore', pkg: 'redis-semaphore', variants: ['default', 'fast'] },
  { adapter: 'simple-redis-mutex', pkg: 'simple-redis-mutex', variants: ['default', 'fast'] },
];

const ALL_ROWS = ADAPTERS.flatMap(({ adapter, variants }) =>
  variants.map((variant) => ({
    adapter,
    variant,
    ours: adapter === 'latchkey',
    label: `${adapter} ${adapter === 'latchkey' && variant === 'default' ? 'notify' : variant}`,
  })),
);

const only = (process.env.BENCH_ONLY ?? '').split(',').map((s) => s.trim()).filter(Boolean);
const ROWS = only.length ? ALL_ROWS.filter((r) => only.some((s) => `${r.adapter}/${r.variant} ${r.label}`.includes(s))) : ALL_ROWS;

const SCENARIO_NAMES = ['handoff', 'inprocess', 'idle', 'uncontended'];
const wantedScenarios = (process.env.BENCH_SCENARIO ?? '').split(',').map((s) => s.trim()).filter(Boolean);
for (const s of wantedScenarios) {
  if (!SCENARIO_NAMES.includes(s) && !/^[1-4]$/.test(s)) {
    throw new Error(`BENCH_SCENARIO: unknown scenario "${s}"; use ${SCENARIO_NAMES.join(', ')} or 1-4`);
  }
}
const SCENARIOS = wantedScenarios.length
  ? SCENARIO_NAMES.filter((name, i) => wantedScenarios.includes(name) || wantedScenarios.includes(String(i + 1)))
  : SCENARIO_NAMES;

const log = (...args) => process.stderr.write(`${args.join(' ')}\n`);
// Passes of every row per scenario (see main); the figures are their medians.
const REPEAT = Math.max(1, Number(process.env.BENCH_REPEAT || 1));

// ---------------------------------------------------------------------------------------------
// Reporting

const fmt = {
  int: (v) => (Number.isFinite(v) ? Math.round(v).toLocaleString('en-US') : '–'),
  ms: (v) => (!Number.isFinite(v) ? '–' : v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v >= 1 ? v.toFixed(2) : v.toFixed(3)),
  f2: (v) => (Number.isFinite(v) ? v.toFixed(2) : '–'),
  f3: (v) => (Number.isFinite(v) ? v.toFixed(3) : '–'),
  pct: (v) => (Number.isFinite(v) ? `${(100 * v).toFixed(0)}%` : '–'),
};

// Per scenario: the columns of its table; `better` marks the ones that get a ratio.
const COLUMNS = {
  handoff: [
    { key: 'acqPerSec', title: 'acq/s', fmt: fmt.int, better: 'higher' },
    { key: 'handoffP50', title: 'hand-off p50 ms', fmt: fmt.ms, better: 'lower' },
    { key: 'handoffP99', title: 'hand-off p99 ms', fmt: fmt.ms, better: 'lower' },
    { key: 'waitP99', title: 'wait p99 ms', fmt: fmt.ms, better: 'lower' },
    { key: 'waitMax', title: 'wait max ms', fmt: fmt.ms, better: 'lower' },
    { key: 'jain', title: 'Jain', fmt: fmt.f3, better: 'higher' },
    { key: 'sameHolderShare', title: 'same holder again', fmt: fmt.pct },
    { key: 'rtPerAcq', title: 'RT/acq', fmt: fmt.f2, better: 'lower' },
    { key: 'failures', title: 'failed acquire()', fmt: fmt.int },
    { key: 'overlaps', title: 'overlaps', fmt: fmt.int },
  ],
  inprocess: [
    { key: 'acqPerSec', title: 'acq/s', fmt: fmt.int, better: 'higher' },
    { key: 'jain', title: 'Jain', fmt: fmt.f3, better: 'higher' },
    // No ratio: a p99 over acquisitions is dominated by the tasks that got the lock most often,
    // so a library that starves most tasks can show the lowest value.
    { key: 'waitP99', title: 'wait p99 ms', fmt: fmt.ms },
    { key: 'waitMax', title: 'wait max ms', fmt: fmt.ms, better: 'lower' },
    { key: 'served', title: `served (of ${TASKS})`, fmt: fmt.int, better: 'higher' },
    { key: 'rtPerAcq', title: 'RT/acq', fmt: fmt.f2, better: 'lower' },
    { key: 'failures', title: 'failed acquire()', fmt: fmt.int },
  ],
  idle: [
    { key: 'rtPerSec', title: 'RT/s while waiting', fmt: fmt.int, better: 'lower' },
    { key: 'releaseToFirst', title: 'release→first ms', fmt: fmt.ms, better: 'lower' },
    { key: 'releaseToAll', title: `release→all ${WAITER_PROCESSES * WAITERS_PER_PROCESS} ms`, fmt: fmt.ms, better: 'lower' },
    { key: 'done', title: 'served', fmt: fmt.int },
    { key: 'drainRtPerAcq', title: 'RT/acq in drain', fmt: fmt.f2, better: 'lower' },
    { key: 'failures', title: 'failed acquire()', fmt: fmt.int },
  ],
  uncontended: [
    { key: 'pairP50', title: 'pair p50 ms', fmt: fmt.ms, better: 'lower' },
    { key: 'pingPairP50', title: '2×PING p50 ms', fmt: fmt.ms },
    { key: 'pairOverPing', title: 'pair / 2×PING', fmt: fmt.f2, better: 'lower' },
    { key: 'rtPerPair', title: 'RT/pair', fmt: fmt.f2, better: 'lower' },
    { key: 'pairsPerSec', title: `pairs/s (${TASKS} keys)`, fmt: fmt.int, better: 'higher' },
    { key: 'rtPerPairParallel', title: `RT/pair (${TASKS} keys)`, fmt: fmt.f2, better: 'lower' },
  ],
};

const TITLES = {
  handoff: `1. Contended hand-off: ${CONTENDERS} processes, one key, 1 ms busy hold`,
  inprocess: `2. In-process contention: ${TASKS} tasks in one process, one key, awaited GET inside`,
  idle: `3. Idle waiters: ${WAITER_PROCESSES * WAITERS_PER_PROCESS} waiters in ${WAITER_PROCESSES} processes on a held key, then one release`,
  uncontended: `4. Uncontended: (a) sequential acquire+release on a free key; (b) ${TASKS} loops on ${TASKS} keys`,
};

function markdownTable(headers, rows) {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
  const line = (cells) => `| ${cells.map((c, i) => (i === 0 ? String(c).padEnd(widths[i]) : String(c).padStart(widths[i]))).join(' | ')} |`;
  const rule = `|${widths.map((w, i) => (i === 0 ? `${'-'.repeat(w + 1)}-` : `${'-'.repeat(w + 1)}:`)).join('|')}|`;
  return [line(headers), rule, ...rows.map(line)].join('\n');
}

/** latchkey / best peer for every column that has a direction. */
function ratios(scenario, rows) {
  const out = [];
  for (const ours of rows.filter((r) => r.ours && !r.error)) {
    const cells = {};
    for (const col of COLUMNS[scenario].filter((c) => c.better)) {
      const mine = ours.metrics[col.key];
      let best = null;
      for (const peer of rows.filter((r) => !r.ours && !r.error)) {
        const v = peer.metrics[col.key];
        if (!Number.isFinite(v)) continue;
        if (!best || (col.better === 'higher' ? v > best.value : v < best.value)) best = { value: v, label: peer.label };
      }
      cells[col.key] =
        best && Number.isFinite(mine)
          ? { ratio: best.value === 0 ? (mine === 0 ? 1 : Infinity) : mine / best.value, bestPeer: best.label, peerValue: best.value }
          : null;
    }
    out.push({ label: ours.label, cells });
  }
  return out;
}

function printScenario(scenario, rows) {
  const cols = COLUMNS[scenario];
  const body = rows.map((r) => [r.label, ...cols.map((c) => (r.error ? (c === cols[0] ? `error: ${r.error.slice(0, 60)}` : '') : c.fmt(r.metrics[c.key])))]);
  console.log(`\n### ${TITLES[scenario]}\n`);
  console.log(markdownTable(['library variant', ...cols.map((c) => c.title)], body));
  const rs = ratios(scenario, rows);
  if (rs.length && rows.some((r) => !r.ours && !r.error)) {
    const rcols = cols.filter((c) => c.better);
    console.log(`\nlatchkey / best peer (best peer per column in brackets):\n`);
    console.log(
      markdownTable(
        ['', ...rcols.map((c) => c.title)],
        rs.map((r) => [
          `${r.label} / best peer`,
          ...rcols.map((c) => {
            const cell = r.cells[c.key];
            if (!cell) return '–';
            if (!Number.isFinite(cell.ratio)) return `∞ (${cell.bestPeer}: 0)`;
            return `${cell.ratio.toFixed(2)}× (${cell.bestPeer})`;
          }),
        ]),
      ),
    );
  }
  const errs = rows.filter((r) => !r.error && r.metrics.errors?.length);
  for (const r of errs) {
    const top = r.metrics.errors.slice(0, 2).map((e) => `${e.count}× ${e.message}`).join('; ');
    console.log(`\n- ${r.label}: acquire()/release() errors: ${top}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Main

function version(pkg) {
  const file = pkg ? path.join(root, 'node_modules', pkg, 'package.json') : path.join(root, 'package.json');
  try {
    return JSON.parse(readFileSync(file, 'utf8')).version;
  } catch {
    return 'unknown';
  }
}

/** One row's timing and round-trip passes in `scenario` (`admin` empties the server before each): its entry (metrics, or the error). */
async function runRow(scenario, row, admin) {
  const entry = { label: row.label, adapter: row.adapter, variant: row.variant, ours: row.ours };
  try {
    const passes = {};
    for (const pass of ['timing', 'rt']) {
      await admin.flushall();
      await admin.script('FLUSH');
      const t = Date.now();
      passes[pass] = await RUNNERS[scenario](row, pass);
      log(`  ${row.label.padEnd(30)} ${pass.padEnd(6)} ${((Date.now() - t) / 1000).toFixed(1).padStart(5)} s  ${brief(scenario, pass, passes[pass])}`);
    }
    // Timing figures from the direct pass, round-trip figures from the proxied pass.
    const rtKeys = ['rt', 'rtPerAcq', 'rtPerSec', 'drainRt', 'drainRtPerAcq', 'rtSequential', 'rtPerPair', 'rtParallel', 'rtPerPairParallel'];
    const metrics = { ...passes.timing };
    for (const k of rtKeys) if (k in passes.rt) metrics[k] = passes.rt[k];
    metrics.errors = mergeErrors(passes.timing.errors, passes.rt.errors);
    Object.assign(entry, { metrics, passes });
  } catch (error) {
    entry.error = String(error?.message ?? error);
    log(`  ${row.label.padEnd(30)} ERROR ${entry.error}`);
  }
  return entry;
}

/** One row's entry from its BENCH_REPEAT passes: the median of each numeric figure over the passes that ran. */
function medianEntry(entries) {
  const ok = entries.filter((e) => !e.error);
  if (ok.length <= 1) return ok[0] ?? entries[0];
  const metrics = { ...ok[0].metrics };
  for (const [key, value] of Object.entries(metrics)) {
    if (typeof value !== 'number') continue;
    const values = ok.map((e) => e.metrics[key]).filter((v) => typeof v === 'number' && !Number.isNaN(v)).sort((a, b) => a - b);
    const mid = values.length >> 1;
    metrics[key] = values.length % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
  }
  return { ...ok[0], metrics, repeats: ok.map((e) => e.metrics) };
}

async function main() {
  if (!ROWS.length) throw new Error(`BENCH_ONLY=${process.env.BENCH_ONLY} matches no library; try one of: ${ALL_ROWS.map((r) => r.label).join(', ')}`);
  const redis = await startRedisServer();
  const cleanup = () => {
    for (const c of liveChildren) c.kill('SIGKILL');
    redis.killSync();
  };
  process.on('exit', cleanup);
  for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(130));
  const proxy = await startCountingProxy(redis.port);
  const { Redis } = await importIoredis();
  const admin = new Redis(redis.url);
  setScenarioEnv({ directUrl: redis.url, proxyUrl: `redis://127.0.0.1:${proxy.port}`, proxy, admin });
  const info = await admin.info('server');
  const redisVersion = /redis_version:(\S+)/.exec(info)?.[1];

  // Seconds per row: both passes plus about 1.5 s of process start-up and shutdown per pass
  // (8 processes in scenario 1: about 4 s), plus the drain in scenario 3.
  const perRow = { handoff: SECONDS + RT_SECONDS + 8, inprocess: SECONDS + RT_SECONDS + 3, idle: Math.min(SECONDS, HOLD_CAP_SECONDS) + RT_SECONDS + 5, uncontended: SECONDS + RT_SECONDS + 3 };
  const estimate = REPEAT * ROWS.length * SCENARIOS.reduce((s, name) => s + perRow[name], 0);
  log(`latchkey bench: redis-server ${redisVersion} pid ${redis.pid} on 127.0.0.1:${redis.port}, counting proxy on :${proxy.port}`);
  log(clientsLine());
  log(`${ROWS.length} rows × ${SCENARIOS.length} scenarios, ${SECONDS} s timing + ${RT_SECONDS} s round-trip passes: roughly ${Math.ceil(estimate / 60)} min`);

  const results = { scenarios: {} };
  const started = Date.now();
  try {
    for (const scenario of SCENARIOS) {
      log(`\n[${scenario}] ${TITLES[scenario]}`);
      // BENCH_REPEAT passes of every row, the order reversed on every other one, so that the
      // machine's noise at one moment does not fall on one library alone: each row's figures are
      // the medians of its passes.
      const passesOf = new Map(ROWS.map((row) => [row, []]));
      for (let rep = 0; rep < REPEAT; rep++) {
        if (REPEAT > 1) log(`  (pass ${rep + 1} of ${REPEAT})`);
        for (const row of rep % 2 === 0 ? ROWS : [...ROWS].reverse()) passesOf.get(row).push(await runRow(scenario, row, admin));
      }
      const rows = ROWS.map((row) => medianEntry(passesOf.get(row)));
      results.scenarios[scenario] = { title: TITLES[scenario], rows, ratios: ratios(scenario, rows) };
    }
  } finally {
    await admin.quit().catch(() => {});
    await proxy.close();
    await redis.stop();
  }

  const minutes = ((Date.now() - started) / 60000).toFixed(1);
  console.log(`## latchkey bench — ${new Date().toISOString()}`);
  console.log(
    `\nnode ${process.version}, redis-server ${redisVersion} (private, loopback, no persistence), ${os.cpus().length} CPUs; ` +
      `timing passes ${SECONDS} s, round-trip passes ${RT_SECONDS} s; run took ${minutes} min.`,
  );
  console.log(`Clients (BENCH_CLIENTS=${CLIENTS.major}, for latchkey and every peer): ${clientLabel(CLIENTS.ioredis)}, ${clientLabel(CLIENTS.nodeRedis)}.`);
  console.log(`Timestamps from process.hrtime.bigint(); hand-off = next holder's acquire() resolved − previous holder's release() called.`);
  console.log(`Ratios: latchkey's figure divided by the best peer's; > 1 is better for acq/s, Jain, served, pairs/s and worse for the rest.`);
  for (const scenario of SCENARIOS) printScenario(scenario, results.scenarios[scenario].rows);
  console.log('\nVariants:');
  for (const { adapter, pkg, variants } of ADAPTERS.filter((a) => ROWS.some((r) => r.adapter === a.adapter))) {
    const { meta } = await import(`./adapters/${adapter}.mjs`);
    console.log(`- ${meta.name} ${version(pkg)} on ${clientLabel(clientOf(meta))}: ${variants.map((v) => `${v} = ${meta.variants[v]}`).join('; ')}`);
  }

  results.meta = {
    date: new Date().toISOString(),
    git: gitState(),
    node: process.version,
    redis: redisVersion,
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model,
    seconds: SECONDS,
    rtSeconds: RT_SECONDS,
    minutes: Number(minutes),
    clients: CLIENTS,
    libraries: Object.fromEntries(
      await Promise.all(
        ADAPTERS.map(async (a) => {
          const { meta } = await import(`./adapters/${a.adapter}.mjs`);
          return [a.adapter, { package: a.pkg ?? `latchkey (${process.env.LATCHKEY_DIST ?? 'dist/'})`, version: version(a.pkg), client: clientLabel(clientOf(meta)) }];
        }),
      ),
    ),
  };
  mkdirSync(path.join(here, 'results'), { recursive: true });
  const out = path.join(here, 'results', 'latest.json');
  writeFileSync(out, `${JSON.stringify(results, null, 2)}\n`);
  log(`\nresults written to ${path.relative(process.cwd(), out)}`);
}

/** The commit latchkey's dist/ was built from, and uncommitted changes under src/ if any. */
function gitState() {
  const git = (...args) => execFileSync('git', args, { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  try {
    return { commit: git('rev-parse', 'HEAD'), uncommittedSrc: git('status', '--porcelain', '--', 'src').split('\n').filter(Boolean) };
  } catch {
    return null;
  }
}

/** The client an adapter's library runs on (its meta.client: 'ioredis' or 'node-redis'). */
const clientOf = (meta) => (meta.client === 'node-redis' ? CLIENTS.nodeRedis : CLIENTS.ioredis);

function mergeErrors(a = [], b = []) {
  const m = new Map();
  for (const { message, count } of [...a, ...b]) m.set(message, (m.get(message) ?? 0) + count);
  return [...m].map(([message, count]) => ({ message, count })).sort((x, y) => y.count - x.count);
}

function brief(scenario, pass, m) {
  if (pass === 'rt') {
    const v = m.rtPerAcq ?? m.rtPerSec ?? m.rtPerPair;
    const unit = scenario === 'idle' ? 'RT/s' : scenario === 'uncontended' ? 'RT/pair' : 'RT/acq';
    return `${fmt.f2(v)} ${unit}`;
  }
  switch (scenario) {
    case 'handoff':
      return `${fmt.int(m.acqPerSec)} acq/s, hand-off p50 ${fmt.ms(m.handoffP50)} ms, failures ${m.failures}`;
    case 'inprocess':
      return `${fmt.int(m.acqPerSec)} acq/s, served ${m.served}/${TASKS}, failures ${m.failures}`;
    case 'idle':
      return `release→first ${fmt.ms(m.releaseToFirst)} ms, →last ${fmt.ms(m.releaseToLast)} ms, ${m.done}/${m.of} served`;
    default:
      return `pair p50 ${fmt.ms(m.pairP50)} ms, ${fmt.int(m.pairsPerSec)} pairs/s`;
  }
}

main().then(
  () => process.exit(0),
  (error) => {
    log(error?.stack ?? String(error));
    process.exit(1);
  },
);
