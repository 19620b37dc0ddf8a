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
// And `scripts`: latchkey's own acquire.lua and release.lua called straight through ioredis, with
// nothing around them (lib/ring.mjs, joinScripts): the floor of a lock with latchkey's guarantees
// (a fence that survives data loss, queue entries that expire with their process).
//
// Next to it, in the same run (passes alternating, PASSES each, default 2), the same loop with
// latchkey and the peers through their bench adapters (RING_WITH, default: every library's
// `default` variant; a failed acquire() is retried at once, as in run.mjs). Figures as in
// bench/run.mjs: acquisitions per second, hand-off (next holder's acquire resolved − previous
// holder's release called, to another process) p50 and p99, and the share of acquisitions that
// went to the process that held the lock just before. Each pass's line (stderr) also gives the
// hand-off's mean (acquisitions per second follow from it: 1 / (hold + mean)), the CPU time per
// acquisition of the 8 workers together (user + system from the measured window's start; 1 ms of
// it is the hold's busy work) and of redis-server (/proc, 10 ms ticks), and the commands Redis ran
// per acquisition (INFO commandstats, those inside scripts included) and of them script calls.
// Usage: npm run build && node bench/ring.mjs   (BENCH_SECONDS per pass, default 5)
//        RING_WITH=latchkey/default,redis-semaphore/fast node bench/ring.mjs
//        RING_WITH=latchkey/default@bench/dist-a/index.js,latchkey/default node bench/ring.mjs  (two builds)
//        BENCH_CLIENTS=5 node bench/ring.mjs  (ioredis 5 and node-redis 5 for every row: lib/clients.mjs)
import { fileURLToPath } from 'node:url';
import { clientsLine, importIoredis } from './lib/clients.mjs';
import { now, sleep, spin } from './lib/clock.mjs';
import { processCpu } from './lib/process-cpu.mjs';
import { callsDelta, commandCalls, scriptCalls, totalCalls } from './lib/redis-info.mjs';
import { startRedisServer } from './lib/redis-server.mjs';
import { joinQueue, joinRing, joinScripts, runWorkers } from './lib/ring.mjs';
import { median, summarize } from './lib/stats.mjs';

const SECONDS = Number(process.env.BENCH_SECONDS || 5);
const PASSES = Number(process.env.PASSES || 2);
const PROCESSES = 8;
const HOLD_MS = 1;
const WARMUP_MS = 1000;
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
  const noteCpu = () => {
    if (cpuFrom === undefined && now() >= windowFrom) cpuFrom = process.cpuUsage();
  };
  let done;
  if (kind === 'ring') {
    const ring = await joinRing(client, i, PROCESSES);
    process.send({ ready: true });
    done = (async () => {
      for (;;) {
        const token = await ring.turn();
        const acquiredAt = now();
        noteCpu();
        spin(HOLD_MS);
        const releaseAt = now();
        records.push([acquiredAt, releaseAt]);
        // The last pass of the ring lets the ring stop: the next process sees the end time too.
        await ring.pass(token);
        if (now() > Number(endAt)) break;
      }
      ring.leave();
    })();
    // Process 0 starts the ring once every process listens (the parent says so).
    if (i === 0) process.once('message', () => void ring.start());
  } else if (kind === 'queue' || kind === 'scripts') {
    const queue = await (kind === 'queue' ? joinQueue : joinScripts)(client, i);
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
  process.send({ records, cpu: used.user + used.system }, () => {
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
  const results = Object.fromEntries(['ring', 'queue', 'scripts', ...RING_WITH].map((kind) => [kind, []]));
  try {
    for (let pass = 0; pass < PASSES; pass++) {
      for (const kind of Object.keys(results)) {
        const startAt = now() + 2000;
        const endAt = startAt + WARMUP_MS + SECONDS * 1000;
        // Redis's CPU time over the measured window (the workers measure theirs).
        let redisFrom;
        let callsFrom;
        const sampleRedis = setTimeout(() => {
          redisFrom = processCpu(server.pid);
          callsFrom = commandCalls(stats);
        }, startAt + WARMUP_MS - now());
        const messages = await runWorkers(here, PROCESSES, (i) => ['--worker', kind, String(server.port), String(i), String(endAt)]);
        clearTimeout(sampleRedis);
        const redisTo = processCpu(server.pid);
        const redisCpu = redisFrom ? redisTo.user + redisTo.system - redisFrom.user - redisFrom.system : NaN;
        const workersCpu = messages.reduce((sum, m) => sum + m.cpu, 0);
        const calls = callsFrom ? callsDelta(await callsFrom, await commandCalls(stats)) : {};
        const all = messages.flatMap((m, p) => m.records.map(([acquiredAt, releaseAt]) => [acquiredAt, releaseAt, p]));
        const from = startAt + WARMUP_MS;
        all.sort((a, b) => a[0] - b[0]);
        const inWindow = all.filter((r) => r[0] >= from && r[0] <= endAt);
        const handoffs = [];
        let same = 0;
        for (let k = 1; k < all.length; k++) {
          if (all[k][0] < from || all[k][0] > endAt) continue;
          if (all[k][2] !== all[k - 1][2]) handoffs.push(all[k][0] - all[k - 1][1]);
          else same++;
        }
        const h = summarize(handoffs);
        const row = { acqPerSecond: inWindow.length / ((endAt - from) / 1000), p50: h.p50, p99: h.p99, mean: h.mean, same: same / Math.max(1, inWindow.length), nodeCpu: workersCpu / inWindow.length, redisCpu: redisCpu / inWindow.length, commands: totalCalls(calls) / inWindow.length, calls: scriptCalls(calls) / inWindow.length };
        results[kind].push(row);
        console.error(
          `${kind.padEnd(30)} ${row.acqPerSecond.toFixed(0)} acq/s  hand-off p50 ${row.p50.toFixed(3)} ms  mean ${row.mean.toFixed(3)} ms  p99 ${row.p99.toFixed(3)} ms  same holder ${(100 * row.same).toFixed(0)} %  CPU per acquisition: Node ${row.nodeCpu.toFixed(0)} µs (1 ms of it the hold), Redis ${row.redisCpu.toFixed(0)} µs; Redis commands ${row.commands.toFixed(2)}, of them script calls ${row.calls.toFixed(2)}`,
        );
        await sleep(200);
      }
    }
  } finally {
    stats.disconnect();
    await server.stop();
  }
  const labels = {
    ring: 'ring: the smallest lock passed between processes',
    queue: 'queue: the smallest fair lock passed between processes',
    scripts: "scripts: latchkey's acquire.lua and release.lua, nothing around them",
  };
  // Ratios per pass (a row against the ring of the same pass), then their median.
  const ratio = (kind, f) => median(results[kind].map((r, pass) => f(r) / f(results.ring[pass])));
  console.log(`| 8 processes, 1 ms hold, median of ${PASSES} passes | acq/s | hand-off p50 ms | hand-off p99 ms | p50 / ring | p99 / ring | same holder again |`);
  console.log('| --- | --: | --: | --: | --: | --: | --: |');
  for (const [kind, rows] of Object.entries(results)) {
    const m = (f) => median(rows.map(f));
    const ratios = `${ratio(kind, (r) => r.p50).toFixed(2)} | ${ratio(kind, (r) => r.p99).toFixed(2)}`;
    console.log(`| ${labels[kind] ?? kind} | ${m((r) => r.acqPerSecond).toFixed(0)} | ${m((r) => r.p50).toFixed(3)} | ${m((r) => r.p99).toFixed(3)} | ${ratios} | ${(100 * m((r) => r.same)).toFixed(0)} % |`);
  }
}
