// The floor under scenario 1 (contended hand-off) for any lock that hands the lock from process to
// process, on this machine: the smallest such lock there can be. 8 worker processes on one key, as
// in scenario 1 (hold = 1 ms of busy work), but the order is fixed in advance (a ring: process i
// always passes to i + 1), so there is no queue to keep, no token to generate and nothing to
// retry. Releasing is one script call that checks the holder's token, writes the next holder's
// and publishes to the next process's channel; the next process holds the lock when that message
// arrives. Nothing can be left out and still be a lock that passes between processes.
// Beside it, `queue`: the smallest fair lock that passes between processes (lib/ring.mjs: SET NX
// PX or join a FIFO list; a release pops the next waiter, gives it the lock and publishes to it).
// A process that wants the lock again after its release joins the list, one round trip while
// another process's wake-up is under way: what any first-come-first-served lock pays here, and
// the ring does not (its order is fixed in advance).
// And `fenced`: the smallest fair lock with latchkey's guarantees (lib/ring.mjs: the queue lock
// with a fence from the server's clock on every acquisition, random tokens, and waiters whose
// process is gone passed over; a grant of 6 Redis commands, a join of 2): the floor the goal's
// ratio can be held to once those guarantees are kept, and the `p50 / fenced` column.
// And `scripts`: latchkey's own acquire.lua and release.lua called straight through ioredis, with
// nothing around them (lib/ring.mjs, joinScripts): the floor of latchkey itself, whose hand-off
// can be no faster than its scripts' (`fenced` is the floor of any lock with its guarantees).
//
// Next to it, in the same run (passes alternating, PASSES each, default 2), the same loop with
// latchkey and the peers through their bench adapters (RING_WITH, default: every library's
// `default` variant; a failed acquire() is retried at once, as in run.mjs). Figures as in
// bench/run.mjs: acquisitions per second, hand-off (next holder's acquire resolved − previous
// holder's release called, to another process) p50 and p99, and the share of acquisitions that
// went to the process that held the lock just before; each p50 and p99 also over the floor, the
// lower of the ring's and the queue's in the same pass (the ring's workers, idle between their
// turns, do not always make it the faster of the two: 5 passes of 8 on 2026-11-29, steady window).
// Each pass's line (stderr) also gives the
// hand-off's mean (acquisitions per second follow from it: 1 / (hold + mean)), the CPU time per
// acquisition of the 8 workers together (user + system from the measured window's start; 1 ms of
// it is the hold's busy work) and of redis-server (/proc, 10 ms ticks), and the commands Redis ran
// per acquisition (INFO commandstats, those inside scripts included) and of them script calls.
// Every figure is given for two windows of BENCH_SECONDS (default 5) of each pass: the processes'
// first seconds (from 1 s after the start) and their steady state (from RING_STEADY s after it,
// default 60; see STEADY_MS). CPU and commands are those of the steady window. RING_SLICES=<ms>
// also prints each row's hand-off p50 and mean per slice of that length: the warm-up, seen.
// RING_SERVER_TIMES=1 also gives, per window, how long Redis ran each script per call (p50, p90:
// lib/script-times.mjs, the slow log recording every command; it costs the server a little).
// Usage: npm run build && node bench/ring.mjs   (about 67 s per row and pass)
//        RING_STEADY=0 node bench/ring.mjs  (the first window alone: 6 s per row and pass)
//        RING_WITH=latchkey/default,redis-semaphore/fast node bench/ring.mjs
//        RING_WITH=latchkey/default@bench/dist-a/index.js,latchkey/default node bench/ring.mjs  (two builds)
//        BENCH_CLIENTS=5 node bench/ring.mjs  (ioredis 5 and node-redis 5 for every row: lib/clients.mjs)
import { fileURLToPath } from 'node:url';
import { clientsLine, importIoredis } from './lib/clients.mjs';
import { now, sleep, spin } from './lib/clock.mjs';
import { otherThreadsCpu, processCpu } from './lib/process-cpu.mjs';
import { callsDelta, commandCalls, scriptCalls, totalCalls } from './lib/redis-info.mjs';
import { startRedisServer } from './lib/redis-server.mjs';
import { joinFencedQueue, joinQueue, joinRing, joinScripts, runWorkers } from './lib/ring.mjs';
import { scriptTimes } from './lib/script-times.mjs';
import { median, summarize } from './lib/stats.mjs';

const SECONDS = Number(process.env.BENCH_SECONDS || 5);
const PASSES = Number(process.env.PASSES || 2);
const PROCESSES = 8;
const HOLD_MS = 1;
const WARMUP_MS = 1000;
// The steady window starts RING_STEADY seconds (default 60) after the start: V8 optimizes a
// function once it has run enough, and a process that takes a lock a hundred times a second runs
// the hand-off's code (the lock's, ioredis's, Node's streams) mostly unoptimized for its first
// seconds (node --trace-opt: latchkey's hand-off functions are optimized 4 to 22 s into a run).
// 20 s (the default until stop 41) was not yet steady: there the rows' workers spent 3-156 µs
// per acquisition on threads other than the main one (V8's compiler, the GC's helpers; median 48),
// at 60 s 0-15 µs in 36 rows of 38, and latchkey's p50 went from 1.21-1.29x its scripts' (four
// runs) to 0.88-1.10x (four runs, 2026-11-29).
// RING_STEADY=0: the first window alone (the run is then 1 + BENCH_SECONDS s per row).
const STEADY_MS = 1000 * Number(process.env.RING_STEADY ?? 60);
// SCRIPTS_REJOIN_MS=<ms>: the `scripts@...` rows wait that long after each release before they ask
// for the lock again (a diagnostic: what the releasing process's next acquire, sent the moment its
// release is answered, costs the hand-off under way; the ring has none, every other row one).
// `RING_WITH=scripts@` (no path: the same release.lua) puts such a row beside the unchanged one.
const REJOIN_MS = Number(process.env.SCRIPTS_REJOIN_MS || 0);
// The floors' workers (ring, queue, fenced, scripts) run with two V8 flags: they allocate so little that,
// by default, V8 takes them for idle processes: its memory reducer shrinks their heaps, from about
// 8 s after their first full GC, with mark-compacts of 10-30 ms each (2-3 per process in the
// steady window, the ring's workers only: `RING_NODE_ARGS=--trace-gc`, stop 40), and their young
// generation shrinks to fit (the ring's workers: 68 scavenges after their tenth second, the other
// rows' 24-32). With `--no-memory-reducer --min-semi-space-size=16` the ring's steady p50 fell from
// above every other row's (seven passes) to level with or below them (three). The libraries' rows
// run as users run them; a floor can only get faster. RING_FLOOR_ARGS="<flags>" replaces the two
// ("" for none: the floors as before stop 40).
const FLOOR_NODE_ARGS = (process.env.RING_FLOOR_ARGS ?? '--no-memory-reducer --min-semi-space-size=16').split(' ').filter(Boolean);
// The floors' rows, in the order they run, before RING_WITH's; "scripts@<path>" is a scripts row too.
const FLOORS = ['ring', 'queue', 'fenced', 'scripts'];
const isFloor = (kind) => FLOORS.includes(kind) || kind.startsWith('scripts@');
const RING_WITH = (
  process.env.RING_WITH ||
  'latchkey/default,redlock-v4/default,redlock-v5/default,sesamecare-redlock/default,redlock-universal/default,redis-semaphore/default,simple-redis-mutex/default'
).split(',');

if (process.argv[2] === '--worker') {
  const [, , , kind, port, index, endAt] = process.argv;
  const i = Number(index);
  const { Redis } = await importIoredis();
  const client = new Redis(Number(port), '127.0.0.1');
  const records = []; // [acquiredAt, releaseCalledAt]
  // This process's CPU time (user + system, µs) from the measured window's start to its end.
  const windowFrom = Number(endAt) - SECONDS * 1000;
  let cpuFrom;
  let threadsFrom;
  const noteCpu = () => {
    if (cpuFrom === undefined && now() >= windowFrom) {
      cpuFrom = process.cpuUsage();
      threadsFrom = otherThreadsCpu();
    }
  };
  let done;
  if (kind === 'ring') {
    const ring = await joinRing(client, i, PROCESSES, Number(endAt));
    process.send({ ready: true });
    done = (async () => {
      for (;;) {
        const token = await ring.turn();
        const acquiredAt = now();
        noteCpu();
        spin(HOLD_MS);
        const releaseAt = now();
        records.push([acquiredAt, releaseAt]);
        if (await ring.pass(token)) break; // the ring's last round (see joinRing)
      }
      ring.leave();
    })();
    // Process 0 starts the ring once every process listens (the parent says so).
    if (i === 0) process.once('message', () => void ring.start());
  } else if (isFloor(kind)) {
    // "scripts@<path>": the scripts row with another release.lua (to compare a change to it in the
    // same run); "scripts@": the same release.lua (with SCRIPTS_REJOIN_MS, the re-join delayed).
    const join = { queue: joinQueue, fenced: joinFencedQueue }[kind] ?? joinScripts;
    const queue = await join(client, i, kind.split('@')[1] || undefined);
    process.send({ ready: true });
    await new Promise((resolve) => process.once('message', resolve));
    done = (async () => {
      while (now() < Number(endAt)) {
        await queue.acquire();
        const acquiredAt = now();
        noteCpu();
        spin(HOLD_MS);
        const releaseAt = now();
        records.push([acquiredAt, releaseAt]);
        await queue.release();
        if (kind.startsWith('scripts@') && REJOIN_MS > 0) await sleep(REJOIN_MS);
      }
      queue.leave();
    })();
  } else {
    // "<adapter>/<variant>@<path to a build's index.js>": latchkey from another build (to compare builds).
    const [spec, dist] = kind.split('@');
    if (dist) process.env.LATCHKEY_DIST = dist;
    const [adapter, variant] = spec.split('/');
    const { create } = await import(`./adapters/${adapter}.mjs`);
    const lock = await create({ url: `redis://127.0.0.1:${port}`, key: 'ring:k', variant, ttl: 10_000 });
    process.send({ ready: true });
    await new Promise((resolve) => process.once('message', resolve));
    done = (async () => {
      while (now() < Number(endAt)) {
        let handle;
        try {
          handle = await lock.acquire();
        } catch {
          continue; // the library gave up (retries exhausted): call again, as run.mjs does
        }
        const acquiredAt = now();
        noteCpu();
        spin(HOLD_MS);
        const releaseAt = now();
        records.push([acquiredAt, releaseAt]);
        await lock.release(handle).catch(() => {});
      }
      await lock.close();
    })();
  }
  await done;
  const used = process.cpuUsage(cpuFrom);
  process.send({ records, cpu: used.user + used.system, threadsCpu: otherThreadsCpu() - threadsFrom }, () => {
    client.disconnect();
    process.exit(0);
  });
} else {
  const used = RING_WITH.some((kind) => kind.startsWith('simple-redis-mutex')) ? ['ioredis', 'nodeRedis'] : ['ioredis'];
  console.log(clientsLine(used));
  const server = await startRedisServer();
  const { Redis } = await importIoredis();
  const stats = new Redis(server.port, '127.0.0.1');
  const here = fileURLToPath(import.meta.url);
  const results = Object.fromEntries([...FLOORS, ...RING_WITH].map((kind) => [kind, []]));
  const times = process.env.RING_SERVER_TIMES ? await scriptTimes(stats) : undefined;
  try {
    for (let pass = 0; pass < PASSES; pass++) {
      for (const kind of Object.keys(results)) {
        const startAt = now() + 2000;
        // The windows: the first seconds after a 1 s warm-up, and the steady state (see STEADY_MS).
        const windows = { early: startAt + WARMUP_MS };
        if (STEADY_MS > 0) windows.steady = startAt + STEADY_MS;
        const last = windows.steady ?? windows.early;
        const endAt = last + SECONDS * 1000;
        // Redis's CPU time and commands over the last window (the workers measure their CPU there too).
        let redisFrom;
        let callsFrom;
        const sampleRedis = setTimeout(() => {
          redisFrom = processCpu(server.pid);
          callsFrom = commandCalls(stats);
        }, last - now());
        // RING_SERVER_TIMES: each window's script calls, timed by the server (lib/script-times.mjs).
        const serverTimes = {};
        const timers = Object.entries(times ? windows : {}).map(([name, from]) => {
          let id;
          const t1 = setTimeout(async () => (id = await times.begin()), from - now());
          const t2 = setTimeout(async () => (serverTimes[name] = times.end(await id)), from + SECONDS * 1000 - now());
          return [t1, t2];
        });
        const messages = await runWorkers(here, PROCESSES, (i) => ['--worker', kind, String(server.port), String(i), String(endAt)], endAt, isFloor(kind) ? FLOOR_NODE_ARGS : []);
        clearTimeout(sampleRedis);
        for (const t of timers.flat()) clearTimeout(t);
        const redisTo = processCpu(server.pid);
        const redisCpu = redisFrom ? redisTo.user + redisTo.system - redisFrom.user - redisFrom.system : NaN;
        const workersCpu = messages.reduce((sum, m) => sum + m.cpu, 0);
        const threadsCpu = messages.reduce((sum, m) => sum + m.threadsCpu, 0);
        const calls = callsFrom ? callsDelta(await callsFrom, await commandCalls(stats)) : {};
        const all = messages.flatMap((m, p) => m.records.map(([acquiredAt, releaseAt]) => [acquiredAt, releaseAt, p]));
        all.sort((a, b) => a[0] - b[0]);
        if (process.env.RING_SLICES) console.error(`${kind} hand-off p50/mean µs per slice (s from the start): ${slices(all, startAt, endAt, Number(process.env.RING_SLICES))}`);
        const row = {};
        for (const [name, from] of Object.entries(windows)) row[name] = windowStats(all, from, from + SECONDS * 1000);
        const n = row[windows.steady ? 'steady' : 'early'].acquisitions;
        Object.assign(row, { nodeCpu: workersCpu / n, threadsCpu: threadsCpu / n, redisCpu: redisCpu / n, commands: totalCalls(calls) / n, calls: scriptCalls(calls) / n });
        for (const [name, reading] of Object.entries(serverTimes)) row[name].scripts = await reading;
        results[kind].push(row);
        const brief = (w) => `${w.acqPerSecond.toFixed(0)} acq/s  hand-off p50 ${w.p50.toFixed(3)} ms  mean ${w.mean.toFixed(3)} ms  p99 ${w.p99.toFixed(3)} ms  same holder ${(100 * w.same).toFixed(0)} %`;
        console.error(`${kind.padEnd(30)} first seconds: ${brief(row.early)}`);
        if (row.steady) console.error(`${''.padEnd(30)} steady:        ${brief(row.steady)}`);
        for (const name of Object.keys(serverTimes)) console.error(`${''.padEnd(30)} server µs per script call (${name === 'early' ? 'first seconds' : 'steady'}): ${scriptLine(row[name].scripts)}`);
        console.error(
          `${''.padEnd(30)} per acquisition (${row.steady ? 'steady' : 'first seconds'}): CPU Node ${row.nodeCpu.toFixed(0)} µs (1 ms of it the hold, ${row.threadsCpu.toFixed(0)} on threads other than the main one), Redis ${row.redisCpu.toFixed(0)} µs; Redis commands ${row.commands.toFixed(2)}, of them script calls ${row.calls.toFixed(2)}`,
        );
        await sleep(200);
      }
    }
  } finally {
    await times?.restore();
    stats.disconnect();
    await server.stop();
  }
  const labels = {
    ring: 'ring: the smallest lock passed between processes',
    queue: 'queue: the smallest fair lock passed between processes',
    fenced: "fenced: the smallest fair lock with latchkey's guarantees",
    scripts: "scripts: latchkey's acquire.lua and release.lua, nothing around them",
  };
  const titles = {
    early: `the first seconds: ${WARMUP_MS / 1000} s to ${WARMUP_MS / 1000 + SECONDS} s after the start`,
    steady: `steady: ${STEADY_MS / 1000} s to ${STEADY_MS / 1000 + SECONDS} s after the start`,
  };
  for (const name of STEADY_MS > 0 ? ['early', 'steady'] : ['early']) {
    // Ratios per pass (a row against a base of the same pass), then their median.
    const over = (base) => (kind, f) => median(results[kind].map((r, pass) => f(r[name]) / base(pass, f)));
    const ratio = over((pass, f) => f(results.ring[pass][name]));
    // The floor of a pass: the lower of the ring's and the queue's (the ring is the smaller lock,
    // but its idle workers do not always make it the faster one: a floor is the least measured).
    const overFloor = over((pass, f) => Math.min(f(results.ring[pass][name]), f(results.queue[pass][name])));
    // And over the smallest fair lock with latchkey's guarantees (the `fenced` row), in the same pass.
    const overFenced = over((pass, f) => f(results.fenced[pass][name]));
    console.log(`\n${titles[name]}\n`);
    console.log(`| 8 processes, 1 ms hold, median of ${PASSES} passes | acq/s | acq/s / ring | hand-off p50 ms | hand-off p99 ms | p50 / ring | p99 / ring | p50 / floor | p99 / floor | p50 / fenced | p99 / fenced | same holder again |`);
    console.log('| --- | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: |');
    for (const [kind, rows] of Object.entries(results)) {
      const m = (f) => median(rows.map((r) => f(r[name])));
      const ratios = [ratio, overFloor, overFenced].flatMap((by) => [by(kind, (w) => w.p50), by(kind, (w) => w.p99)]).map((x) => x.toFixed(2)).join(' | ');
      console.log(
        `| ${labels[kind] ?? kind} | ${m((w) => w.acqPerSecond).toFixed(0)} | ${ratio(kind, (w) => w.acqPerSecond).toFixed(2)} | ${m((w) => w.p50).toFixed(3)} | ${m((w) => w.p99).toFixed(3)} | ${ratios} | ${(100 * m((w) => w.same)).toFixed(0)} % |`,
      );
    }
    if (times) {
      console.log(`\nserver µs per script call (p50 and p90 of the window's calls, median of ${PASSES} passes; calls per acquisition)\n`);
      console.log('| row | script | calls per acquisition | p50 µs | p90 µs |');
      console.log('| --- | --- | --: | --: | --: |');
      for (const [kind, rows] of Object.entries(results)) {
        for (const script of new Set(rows.flatMap((r) => Object.keys(r[name].scripts ?? {})))) {
          const m = (f) => median(rows.map((r) => (r[name].scripts?.[script] ? f(r[name].scripts[script], r[name]) : NaN)).filter((x) => !Number.isNaN(x)));
          console.log(`| ${kind} | ${script} | ${m((t, w) => t.n / w.acquisitions).toFixed(2)} | ${m((t) => t.p50)} | ${m((t) => t.p90)} |`);
        }
      }
    }
  }
}

/** One window's script calls timed by the server, for a pass's line: "<script> <p50>/<p90> µs ×<n>". */
function scriptLine(scripts) {
  return Object.entries(scripts)
    .map(([name, t]) => `${name} ${t.p50}/${t.p90} µs ×${t.n}`)
    .join(', ');
}

/** Acquisitions per second, the hand-offs to another process (p50, p99, mean, ms) and the share that went to the same holder, of the acquisitions in [from, to]. */
function windowStats(all, from, to) {
  const handoffs = [];
  let acquisitions = 0;
  let same = 0;
  for (let k = 0; k < all.length; k++) {
    if (all[k][0] < from || all[k][0] > to) continue;
    acquisitions++;
    if (k === 0) continue;
    if (all[k][2] !== all[k - 1][2]) handoffs.push(all[k][0] - all[k - 1][1]);
    else same++;
  }
  const h = summarize(handoffs);
  return { acquisitions, acqPerSecond: acquisitions / ((to - from) / 1000), p50: h.p50, p99: h.p99, mean: h.mean, same: same / Math.max(1, acquisitions) };
}

/** Hand-off p50 and mean (µs) per `ms` slice of the whole run, warm-up included: how long the code takes to reach its steady state. */
function slices(all, startAt, endAt, ms) {
  const parts = [];
  for (let t = startAt; t < endAt; t += ms) {
    const w = windowStats(all, t, t + ms);
    parts.push(`${((t - startAt) / 1000).toFixed(0)}s ${(1000 * w.p50).toFixed(0)}/${(1000 * w.mean).toFixed(0)}`);
  }
  return parts.join('  ');
}
