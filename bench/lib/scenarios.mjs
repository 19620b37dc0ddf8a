// The four scenarios of bench/run.mjs (see bench/README.md), each run once per pass: "timing"
// (clients straight to redis-server) and "rt" (clients through the counting proxy, shorter: only
// round-trip figures are taken from it). Each runner forks its worker processes, tells them when
// to start and stop, and computes every figure from their raw timestamps.
import { now, sleep } from './clock.mjs';
import { diffCounts } from './proxy.mjs';
import { jain, summarize } from './stats.mjs';
import { withWorkers } from './workers.mjs';

function seconds(name, fallback) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} must be a positive number of seconds, got ${raw}`);
  return n;
}

export const SECONDS = seconds('BENCH_SECONDS', 10);
export const RT_SECONDS = seconds('BENCH_RT_SECONDS', Math.min(3, SECONDS));
export const HOLD_CAP_SECONDS = 8; // scenario 3 keeps every wait below the 10 s acquire limit
export const CONTENDERS = 8; // scenario 1 processes
export const TASKS = 64; // scenario 2 tasks, scenario 4b loops
export const WAITER_PROCESSES = 4; // scenario 3
export const WAITERS_PER_PROCESS = 50;
const DRAIN_CAP_MS = 30_000; // scenario 3: longest wait for the 200 waiters after the release

const log = (...args) => process.stderr.write(`${args.join(' ')}\n`);

let env; // { directUrl, proxyUrl, proxy, admin }
let runCounter = 0;

/** Where the passes connect: `{ directUrl, proxyUrl, proxy, admin }`; set once before the first pass. */
export function setScenarioEnv(e) {
  env = e;
}

function passSetup(row, pass, scenario) {
  runCounter++;
  return {
    adapter: row.adapter,
    variant: row.variant,
    url: pass === 'rt' ? env.proxyUrl : env.directUrl,
    directUrl: env.directUrl,
    key: `bench:${scenario}:${row.adapter}:${row.variant}:${pass}:${runCounter}`,
  };
}

const passMs = (pass) => 1000 * (pass === 'rt' ? RT_SECONDS : SECONDS);
const warmupMs = (ms) => Math.min(1000, 0.2 * ms);

/** Sleeps until `t` on the shared clock. */
const sleepUntil = (t) => sleep(Math.max(0, t - now()));

/** Counts proxy commands over [from, to] while `work` runs; null in the timing pass. */
function countWindow(pass, from, to) {
  if (pass !== 'rt') return Promise.resolve(null);
  return (async () => {
    await sleepUntil(from);
    const a = env.proxy.snapshot();
    const t0 = now();
    await sleepUntil(to);
    const b = env.proxy.snapshot();
    return { ...diffCounts(a, b), seconds: (now() - t0) / 1000 };
  })();
}

function errorsOf(results) {
  const merged = new Map();
  for (const r of results) for (const { message, count } of r.errors ?? []) merged.set(message, (merged.get(message) ?? 0) + count);
  return [...merged].map(([message, count]) => ({ message, count })).sort((a, b) => b.count - a.count);
}

/** Longest wait including waits still in progress when the worker reported. */
function longestWait(waits, results) {
  let longest = 0;
  for (const w of waits) longest = Math.max(longest, w);
  for (const r of results) for (const w of r.pending ?? []) longest = Math.max(longest, r.at - w);
  return longest;
}

/** Scenario 1: 8 processes loop on one key, 1 ms busy hold. */
async function runHandoff(row, pass) {
  const ms = passMs(pass);
  const setup = { ...passSetup(row, pass, 'handoff'), role: 'handoff', holdMs: 1 };
  return withWorkers(async (spawn) => {
    const workers = Array.from({ length: CONTENDERS }, () => spawn(setup));
    await Promise.all(workers.map((w) => w.next('ready', 30_000)));
    const goAt = now();
    const endAt = goAt + ms;
    const winStart = goAt + warmupMs(ms);
    for (const w of workers) w.send({ cmd: 'go', endAt });
    const counted = countWindow(pass, winStart, endAt);
    const results = await Promise.all(workers.map((w) => w.next('result', ms + 30_000)));
    const rt = await counted;

    const all = [];
    results.forEach((r, worker) => {
      for (const [wantAt, acquiredAt, releaseAt, releaseDoneAt, failures] of r.records) {
        if (acquiredAt >= winStart && acquiredAt <= endAt) all.push({ worker, wantAt, acquiredAt, releaseAt, releaseDoneAt, failures });
      }
    });
    all.sort((a, b) => a.acquiredAt - b.acquiredAt);
    const handoffs = [];
    let same = 0;
    let overlaps = 0;
    for (let i = 1; i < all.length; i++) {
      const prev = all[i - 1];
      const next = all[i];
      if (next.worker === prev.worker) {
        same++;
        continue;
      }
      const gap = next.acquiredAt - prev.releaseAt;
      if (gap < 0) overlaps++;
      handoffs.push(gap);
    }
    const perWorker = Array(CONTENDERS).fill(0);
    for (const a of all) perWorker[a.worker]++;
    const waits = all.map((a) => a.acquiredAt - a.wantAt);
    const windowSec = (endAt - winStart) / 1000;
    const h = summarize(handoffs);
    const w = summarize(waits);
    return {
      acquisitions: all.length,
      acqPerSec: all.length / windowSec,
      handoffP50: h.p50,
      handoffP99: h.p99,
      handoffs: h.n,
      sameHolderShare: all.length > 1 ? same / (all.length - 1) : NaN,
      waitP99: w.p99,
      waitMax: longestWait(waits, results),
      jain: jain(perWorker),
      perWorker,
      failures: all.reduce((s, a) => s + a.failures, 0),
      overlaps,
      errors: errorsOf(results),
      ...(rt && { rt, rtPerAcq: rt.total / all.length }),
    };
  });
}

/** Scenario 2: 64 tasks in one process on one key, awaited GET (own client, not counted) inside. */
async function runInProcess(row, pass) {
  const ms = passMs(pass);
  const base = passSetup(row, pass, 'inprocess');
  const setup = { ...base, role: 'inProcess', tasks: TASKS, dataKey: `${base.key}:data` };
  return withWorkers(async (spawn) => {
    const worker = spawn(setup);
    await worker.next('ready', 30_000);
    const goAt = now();
    const endAt = goAt + ms;
    const winStart = goAt + warmupMs(ms);
    worker.send({ cmd: 'go', endAt });
    const counted = countWindow(pass, winStart, endAt);
    const result = await worker.next('result', ms + 30_000);
    const rt = await counted;
    const inWindow = result.records.filter(([, , acquiredAt]) => acquiredAt >= winStart && acquiredAt <= endAt);
    const perTask = Array(TASKS).fill(0);
    for (const [task] of inWindow) perTask[task]++;
    const waits = inWindow.map(([, wantAt, acquiredAt]) => acquiredAt - wantAt);
    const windowSec = (endAt - winStart) / 1000;
    return {
      acquisitions: inWindow.length,
      acqPerSec: inWindow.length / windowSec,
      jain: jain(perTask),
      waitMax: longestWait(waits, [result]),
      waitP99: summarize(waits).p99,
      served: perTask.filter((n) => n > 0).length,
      perTask,
      failures: inWindow.reduce((s, r) => s + r[5], 0),
      errors: errorsOf([result]),
      ...(rt && { rt, rtPerAcq: rt.total / inWindow.length }),
    };
  });
}

/** Scenario 3: a long holder, 200 waiters in 4 processes; then the release and the drain. */
async function runIdle(row, pass) {
  const holdMs = 1000 * (pass === 'rt' ? RT_SECONDS : Math.min(SECONDS, HOLD_CAP_SECONDS));
  const base = passSetup(row, pass, 'idle');
  return withWorkers(async (spawn) => {
    const holder = spawn({ ...base, role: 'holder', ttl: 60_000 });
    await holder.next('held', 30_000);
    const waiters = Array.from({ length: WAITER_PROCESSES }, () => spawn({ ...base, role: 'waiters', tasks: WAITERS_PER_PROCESS }));
    await Promise.all(waiters.map((w) => w.next('ready', 30_000)));
    for (const w of waiters) w.send({ cmd: 'go' });
    await Promise.all(waiters.map((w) => w.next('waiting', 30_000)));
    const startAt = now();
    const settle = Math.min(1000, 0.25 * holdMs);
    const rt = await countWindow(pass, startAt + settle, startAt + holdMs);
    await sleepUntil(startAt + holdMs);
    const before = pass === 'rt' ? env.proxy.snapshot() : null;
    holder.send({ cmd: 'release' });
    const held = await holder.next('result', 30_000);
    const stopTimer = setTimeout(() => {
      log(`    drain not finished ${DRAIN_CAP_MS / 1000} s after the release: stopping the waiters`);
      for (const w of waiters) w.send({ cmd: 'stop' });
    }, DRAIN_CAP_MS);
    let results;
    try {
      results = await Promise.all(waiters.map((w) => w.next('result', DRAIN_CAP_MS + 20_000)));
    } finally {
      clearTimeout(stopTimer);
    }
    const drain = before && diffCounts(before, env.proxy.snapshot());
    const acquired = results.flatMap((r) => r.records.map(([, acquiredAt]) => acquiredAt)).sort((a, b) => a - b);
    const waitFailures = results.reduce((s, r) => s + r.records.reduce((t, rec) => t + rec[4], 0), 0);
    const total = WAITER_PROCESSES * WAITERS_PER_PROCESS;
    return {
      holdSeconds: holdMs / 1000,
      releaseToFirst: acquired.length ? acquired[0] - held.releaseAt : NaN,
      releaseToAll: acquired.length === total ? acquired[acquired.length - 1] - held.releaseAt : NaN,
      releaseToLast: acquired.length ? acquired[acquired.length - 1] - held.releaseAt : NaN,
      done: acquired.length,
      of: total,
      failures: waitFailures,
      errors: errorsOf([held, ...results]),
      ...(rt && { rt, rtPerSec: rt.total / rt.seconds }),
      ...(drain && { drainRt: drain, drainRtPerAcq: drain.total / Math.max(1, acquired.length) }),
    };
  });
}

/** Scenario 4: (a) sequential pairs on a free key vs two PINGs, (b) 64 loops on 64 keys. */
async function runUncontended(row, pass) {
  const ms = passMs(pass);
  const setup = { ...passSetup(row, pass, 'uncontended'), role: 'uncontended', tasks: TASKS, ping: pass === 'timing' };
  return withWorkers(async (spawn) => {
    const worker = spawn(setup);
    await worker.next('ready', 30_000);
    const goAt = now();
    const splitAt = goAt + ms / 2;
    const endAt = goAt + ms;
    const warm = warmupMs(ms / 2);
    worker.send({ cmd: 'go', splitAt, endAt });
    const rtA = await countWindow(pass, goAt + warm, splitAt);
    const rtB = await countWindow(pass, splitAt + warm, endAt);
    const result = await worker.next('result', ms + 60_000);
    const pairs = [];
    for (let i = 0; i < result.pairs.length; i += 2) {
      if (result.pairs[i] >= goAt + warm && result.pairs[i] + result.pairs[i + 1] <= splitAt) pairs.push(result.pairs[i + 1]);
    }
    const pings = [];
    for (let i = 0; i < result.pings.length; i += 2) if (result.pings[i] >= goAt + warm) pings.push(result.pings[i + 1]);
    const parallel = result.done.filter((t) => t >= splitAt + warm && t <= endAt).length;
    const pairP50 = summarize(pairs).p50;
    const pingP50 = summarize(pings).p50;
    return {
      pairs: pairs.length,
      pairP50,
      pairP99: summarize(pairs).p99,
      pingPairP50: pingP50,
      pairOverPing: pairP50 / pingP50,
      parallelPairs: parallel,
      pairsPerSec: parallel / ((endAt - splitAt - warm) / 1000),
      errors: errorsOf([result]),
      ...(rtA && { rtSequential: rtA, rtPerPair: rtA.total / Math.max(1, pairs.length) }),
      ...(rtB && { rtParallel: rtB, rtPerPairParallel: rtB.total / Math.max(1, parallel) }),
    };
  });
}

/** The runner of each scenario: `(row, pass) => figures`. */
export const RUNNERS = { handoff: runHandoff, inprocess: runInProcess, idle: runIdle, uncontended: runUncontended };
