// At scale: what held leases and idle waiters cost, per lease and per waiter, latchkey next to
// redis-semaphore's Mutex (auto-refreshed: one timer and one script call per lock), on one
// private redis-server, sizes from small to large, both libraries in the same run.
//   (a) held leases: one process, one library instance, N distinct keys acquired (renewal on,
//       TTL 10 s, 1,000 at a time) and held for SCALE_SECONDS: Redis commands/s (INFO
//       commandstats, every command including those a script runs) and script calls/s, the round
//       trips the process sent (counted in its ioredis client), Redis CPU and Node CPU (% of one
//       core), Redis memory and Node heap per lease (heapUsed after gc, minus the baseline), leases
//       lost; then all released.
//   (b) waiters: N keys held by one process (renewal on); 4 worker processes start N/4 waiters
//       each on distinct held keys (wait 60 s): the time until every waiter's first attempt was
//       answered and (latchkey) until Redis holds every queue entry, the round trips per second
//       while they wait, the subscriber connections' memory (CLIENT LIST), memory per waiter; then
//       the keys are released one by one, at most SCALE_RELEASE_RATE a second: per waiter, its
//       acquire resolved − its key's release called (one monotonic clock for all processes),
//       p50/p99/max.
//   Beside them, in the same processes and the same run, the floor (lib/scale-roles.mjs,
//   floorLibrary): the smallest checked renewal of the same leases at the same rate (an MGET and
//   a PEXPIRE per lease, 500 a call, every third of the TTL), and the smallest notified hand-off
//   (the ring's pass-on to a subscribed waiter, nothing kept in a queue): a cost or a latency
//   below it is out of reach on the machine.
// Usage: npm run bench (after semaphore.mjs), or node bench/scale.mjs after npm run build.
// Env: SCALE_LEASES (default 1,10,100,1000,10000,100000), SCALE_WAITERS (default
// 10,100,1000,10000), SCALE_SECONDS (hold window, default 20), SCALE_WAIT_SECONDS (window while
// waiting, default min(10, SCALE_SECONDS)), SCALE_ONLY=latchkey|redis-semaphore, SCALE_FLOOR=0
// (no floor rows), SCALE_RELEASE_RATE (releases a second, default 2,000; 0: as fast as it can),
// SCALE_NODE_ARGS (flags for the roles' node, e.g. --cpu-prof), SCALE_SIGNAL=1 (count latchkey's
// losses on lease.signal), LATCHKEY_DIST, BENCH_CLIENTS=6|5.
// Results: bench/results/scale-latest.json and the chart bench/results/scale-chart.svg.
import { fork } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CLIENTS, clientsLine, importIoredis } from './lib/clients.mjs';
import { baseString, sleep } from './lib/clock.mjs';
import { latchkeyModule } from './lib/latchkey-module.mjs';
import { clientList, serverLoad, serverReading, subscribers } from './lib/redis-info.mjs';
import { startRedisServer } from './lib/redis-server.mjs';
import { summarize } from './lib/stats.mjs';

const here = fileURLToPath(import.meta.url);

function sizes(name, fallback) {
  return (process.env[name] || fallback)
    .split(',')
    .map((s) => Number(s.trim().replace(/_/g, '')))
    .filter((n) => Number.isInteger(n) && n > 0);
}

const log = (...args) => process.stderr.write(`${args.join(' ')}\n`);
const fmt = (v, digits = 0) => (Number.isFinite(v) ? v.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits }) : 'n/a');
/** A rate: one decimal under 10, else none. */
const rate = (v) => fmt(v, Math.abs(v) < 10 ? 1 : 0);
const kb = (bytes) => (Number.isFinite(bytes) ? `${(bytes / 1024).toFixed(2)} KB` : 'n/a');
const WORKERS = 4;
/** Releases a second at most, the same for every library (0: as fast as the holder can). */
const RELEASE_RATE = Number(process.env.SCALE_RELEASE_RATE ?? 2000);

/** A forked role with a message inbox: next(type) resolves with the next message of that type. */
function spawnRole(role, setup) {
  const child = fork(here, ['--role', role], { stdio: ['ignore', 2, 2, 'ipc'], execArgv: ['--expose-gc', ...(process.env.SCALE_NODE_ARGS?.split(' ').filter(Boolean) ?? [])], env: { ...process.env, BENCH_BASE: baseString } });
  const inbox = [];
  const waiting = [];
  let failure;
  const fail = (error) => {
    failure ??= error;
    for (const w of waiting.splice(0)) w.reject(failure);
  };
  child.on('message', (m) => {
    if (m.type === 'fatal') return fail(new Error(`${role}: ${m.message}`));
    const i = waiting.findIndex((w) => w.type === m.type);
    if (i >= 0) waiting.splice(i, 1)[0].resolve(m);
    else inbox.push(m);
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.once('exit', (code) => fail(new Error(`${role} exited (${code}) before reporting`)));
  child.send(setup);
  return {
    send: (m) => child.connected && child.send(m),
    next(type, timeoutMs = 600_000) {
      const i = inbox.findIndex((m) => m.type === type);
      if (i >= 0) return Promise.resolve(inbox.splice(i, 1)[0]);
      if (failure) return Promise.reject(failure);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`${role}: no "${type}" within ${timeoutMs / 1000} s`)), timeoutMs);
        waiting.push({ type, resolve: (m) => (clearTimeout(timer), resolve(m)), reject: (e) => (clearTimeout(timer), reject(e)) });
      });
    },
    exited,
    kill: () => child.exitCode === null && child.kill('SIGKILL'),
  };
}

async function fresh(harness) {
  await harness.flushall();
  await harness.script('FLUSH');
  await harness.call('CONFIG', 'RESETSTAT');
}

/** (a) N held leases for `seconds`. */
async function heldLeases(harness, server, lib, n, seconds) {
  await fresh(harness);
  const child = spawnRole('held', { lib, port: server.port, n });
  try {
    await child.next('ready');
    const empty = await serverReading(harness, server.pid);
    child.send({ type: 'acquire' });
    const { acquireMs } = await child.next('held');
    // The window starts 1.5 s after the last acquire: off the renewal bursts' edges (latchkey's every
    // 3.33 s, redis-semaphore's every 8 s, counted from when the leases were taken).
    await sleep(1500);
    const before = await serverReading(harness, server.pid);
    child.send({ type: 'start' });
    await sleep(seconds * 1000);
    const after = await serverReading(harness, server.pid);
    child.send({ type: 'stop' });
    const m = await child.next('measured');
    const { releaseMs } = await child.next('released');
    await child.exited;
    const load = serverLoad(before, after);
    return {
      lib,
      n,
      seconds: load.seconds,
      acquireMs,
      releaseMs,
      commandsPerSecond: load.commandsPerSecond,
      scriptCallsPerSecond: load.scriptCallsPerSecond,
      roundTripsPerSecond: m.sent / load.seconds,
      redisCpuPercent: load.cpuPercent,
      nodeCpuPercent: (m.cpuMicros / (load.seconds * 1e6)) * 100,
      redisMemoryPerLease: (before.usedMemory - empty.usedMemory) / n,
      heapPerLease: m.heapPerLease,
      lost: m.lost,
      notHeld: m.notHeld,
      calls: load.calls,
    };
  } finally {
    child.kill();
  }
}

/** The number of `keys` that exist, asked in chunks (one EXISTS per chunk). */
async function existing(harness, keys) {
  let n = 0;
  for (let i = 0; i < keys.length; i += 5000) n += await harness.exists(...keys.slice(i, i + 5000));
  return n;
}

/** (b) N waiters in WORKERS processes on N held keys. */
async function waiters(harness, server, lib, n, windowSeconds) {
  await fresh(harness);
  const holder = spawnRole('holder', { lib, port: server.port, n, rate: RELEASE_RATE });
  const workers = [];
  try {
    await holder.next('held');
    const share = Math.ceil(n / WORKERS);
    for (let from = 0; from < n; from += share) workers.push(spawnRole('waiters', { lib, port: server.port, from, count: Math.min(share, n - from) }));
    await Promise.all(workers.map((w) => w.next('ready')));
    const held = await serverReading(harness, server.pid);
    const goAt = performance.now();
    for (const w of workers) w.send({ type: 'go' });
    // latchkey: poll until every waiter's entry is in its lock's queue (each on its own key).
    let queuedMs;
    if (lib === 'latchkey') {
      const queueKeys = Array.from({ length: n }, (_, i) => `scale:{k${i}}:queue`);
      const deadline = goAt + 60_000;
      while (performance.now() < deadline && (await existing(harness, queueKeys)) < n) await sleep(n > 2000 ? 25 : 5);
      queuedMs = performance.now() - goAt;
    }
    const answers = await Promise.all(workers.map((w) => w.next('answered', 120_000)));
    const started = Math.min(...answers.map((a) => a.started));
    const firstAnsweredMs = Math.max(...answers.map((a) => a.lastFirstAnswer)) - started;
    await sleep(1000); // settle: the first attempts and subscriptions are behind
    const count = async (heap = false) => {
      for (const w of [...workers, holder]) w.send({ type: workers.includes(w) ? 'count-or-finish' : 'count-or-release', what: 'count', heap });
      return Promise.all([...workers, holder].map((w) => w.next('count')));
    };
    const c0 = await count();
    const before = await serverReading(harness, server.pid);
    await sleep(windowSeconds * 1000);
    const after = await serverReading(harness, server.pid);
    const c1 = await count(true);
    const load = serverLoad(before, after);
    const subs = subscribers(await clientList(harness));
    const sent = (cs) => cs.slice(0, workers.length).reduce((a, c) => a + c.sent, 0);
    const cpu = (cs) => cs.slice(0, workers.length).reduce((a, c) => a + c.cpu.user + c.cpu.system, 0);
    const heaps = c1.slice(0, workers.length).map((c) => c.heapPerWaiter);
    // Release one by one; every waiter's acquire resolved − its key's release called.
    holder.send({ type: 'count-or-release', what: 'release' });
    for (const w of workers) w.send({ type: 'count-or-finish', what: 'finish' });
    const { calledAt } = await holder.next('releases');
    const resolved = await Promise.all(workers.map((w) => w.next('resolved', 120_000)));
    const latencies = [];
    const series = []; // [release called (ms after the first), release→acquired (ms)], in release order
    let from = 0;
    for (const r of resolved) {
      r.resolvedAt.forEach((t, i) => {
        if (t === null || t === undefined) return;
        latencies.push(t - calledAt[from + i]);
        series[from + i] = [+(calledAt[from + i] - calledAt[0]).toFixed(3), +(t - calledAt[from + i]).toFixed(3)];
      });
      from += r.resolvedAt.length;
    }
    await Promise.all([holder, ...workers].map((p) => p.next('closed')));
    return {
      lib,
      n,
      seconds: load.seconds,
      queuedMs,
      firstAnsweredMs,
      waiterRoundTripsPerSecond: (sent(c1) - sent(c0)) / load.seconds,
      holderRoundTripsPerSecond: (c1.at(-1).sent - c0.at(-1).sent) / load.seconds,
      commandsPerSecond: load.commandsPerSecond,
      scriptCallsPerSecond: load.scriptCallsPerSecond,
      redisCpuPercent: load.cpuPercent,
      workersCpuPercent: ((cpu(c1) - cpu(c0)) / (load.seconds * 1e6)) * 100,
      redisMemoryPerWaiter: (before.usedMemory - held.usedMemory) / n,
      heapPerWaiter: heaps.reduce((a, b) => a + b, 0) / heaps.length,
      subscribers: subs.length,
      subscriberChannels: subs.reduce((a, c) => a + (c.sub ?? 0) + (c.ssub ?? 0), 0),
      subscriberOmem: subs.reduce((a, c) => a + (c.omem ?? 0), 0),
      subscriberTotMem: subs.reduce((a, c) => a + (c['tot-mem'] ?? 0), 0),
      handoff: summarize(latencies),
      releases: series.filter(Boolean),
      served: latencies.length,
      failed: resolved.reduce((a, r) => a + r.failed, 0),
      failures: resolved.flatMap((r) => r.failures).slice(0, 3),
      calls: load.calls,
    };
  } finally {
    for (const p of [holder, ...workers]) p.kill();
  }
}

function heldTable(rows) {
  const out = [
    '| library | leases | Redis cmd/s | script calls/s | round trips/s | Redis CPU | Node CPU | Redis mem/lease | heap/lease | lost | per lease: Redis CPU µs/s | Node CPU µs/s | cmd/s |',
    '| --- | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: |',
  ];
  for (const r of rows) {
    if (r.error) {
      out.push(`| ${r.lib} | ${fmt(r.n)} | error: ${r.error} |`);
      continue;
    }
    out.push(
      `| ${r.lib} | ${fmt(r.n)} | ${rate(r.commandsPerSecond)} | ${rate(r.scriptCallsPerSecond)} | ${rate(r.roundTripsPerSecond)} | ${fmt(r.redisCpuPercent, 1)} % | ${fmt(r.nodeCpuPercent, 1)} % | ` +
        `${kb(r.redisMemoryPerLease)} | ${kb(r.heapPerLease)} | ${r.lost + (r.notHeld > r.lost ? ` (${r.notHeld} not held)` : '')} | ` +
        `${fmt((r.redisCpuPercent * 1e4) / r.n, 2)} | ${fmt((r.nodeCpuPercent * 1e4) / r.n, 2)} | ${fmt(r.commandsPerSecond / r.n, 3)} |`,
    );
  }
  return out.join('\n');
}

function waitersTable(rows) {
  const out = [
    '| library | waiters | all first attempts answered | all queued in Redis | waiters\' round trips/s | per waiter | Redis cmd/s | Redis CPU | waiters\' CPU | Redis mem/waiter | heap/waiter | subscribers (channels) | subscriber mem | release→acquired p50 / p99 / max | served |',
    '| --- | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: |',
  ];
  for (const r of rows) {
    if (r.error) {
      out.push(`| ${r.lib} | ${fmt(r.n)} | error: ${r.error} |`);
      continue;
    }
    const h = r.handoff;
    out.push(
      `| ${r.lib} | ${fmt(r.n)} | ${fmt(r.firstAnsweredMs, 1)} ms | ${r.queuedMs === undefined ? '—' : `${fmt(r.queuedMs, 1)} ms`} | ${rate(r.waiterRoundTripsPerSecond)} | ${fmt(r.waiterRoundTripsPerSecond / r.n, 2)} | ` +
        `${rate(r.commandsPerSecond)} | ${fmt(r.redisCpuPercent, 1)} % | ${fmt(r.workersCpuPercent, 1)} % | ${kb(r.redisMemoryPerWaiter)} | ${kb(r.heapPerWaiter)} | ` +
        `${r.subscribers} (${r.subscriberChannels}) | ${kb(r.subscriberTotMem)} (omem ${kb(r.subscriberOmem)}) | ${fmt(h.p50, 2)} / ${fmt(h.p99, 2)} / ${fmt(h.max, 2)} ms | ${r.served}/${r.n}${r.failed ? `, ${r.failed} failed` : ''} |`,
    );
  }
  return out.join('\n');
}

async function main() {
  const leases = sizes('SCALE_LEASES', '1,10,100,1000,10000,100000');
  const waiterSizes = sizes('SCALE_WAITERS', '10,100,1000,10000');
  const seconds = Number(process.env.SCALE_SECONDS || 20);
  const waitSeconds = Number(process.env.SCALE_WAIT_SECONDS || Math.min(10, seconds));
  const only = (process.env.SCALE_ONLY ?? '').split(',').map((s) => s.trim()).filter(Boolean);
  const libs = ['latchkey', 'redis-semaphore'].filter((l) => only.length === 0 || only.some((o) => l.includes(o)));
  console.log(clientsLine(['ioredis']));
  const { Redis } = await importIoredis();
  const server = await startRedisServer();
  const harness = new Redis(server.port, '127.0.0.1');
  const redisVersion = (await harness.info('server')).match(/redis_version:(\S+)/)?.[1];
  const meta = {
    date: new Date().toISOString(),
    node: process.version,
    redis: redisVersion,
    cpus: (await import('node:os')).cpus().length,
    clients: CLIENTS,
    latchkey: latchkeyModule(),
    redisSemaphore: JSON.parse(readFileSync(new URL('../node_modules/redis-semaphore/package.json', import.meta.url), 'utf8')).version,
    seconds,
    waitSeconds,
    releaseRate: RELEASE_RATE,
    ttl: 10_000,
    workers: WORKERS,
    sizes: { leases, waiters: waiterSizes },
  };
  const results = { meta, held: [], waiters: [] };
  const save = () => {
    mkdirSync(path.join(path.dirname(here), 'results'), { recursive: true });
    writeFileSync(path.join(path.dirname(here), 'results', 'scale-latest.json'), `${JSON.stringify(results, null, 2)}\n`);
  };
  try {
    // The floor runs beside them (SCALE_FLOOR=0 leaves it out): lib/scale-roles.mjs, floorLibrary.
    const withFloor = process.env.SCALE_FLOOR === '0' ? libs : [...libs, 'floor'];
    for (const n of leases) {
      for (const lib of withFloor) {
        log(`held leases: ${lib}, ${n.toLocaleString('en-US')} for ${seconds} s`);
        results.held.push(await heldLeases(harness, server, lib, n, seconds).catch((e) => ({ lib, n, error: e.message.split('\n')[0] })));
        save();
      }
    }
    if (results.held.length) console.log(`\n### (a) held leases, renewed (TTL 10 s), ${seconds} s window\n\n${heldTable(results.held)}`);
    for (const n of waiterSizes) {
      for (const lib of withFloor) {
        log(`waiters: ${lib}, ${n.toLocaleString('en-US')} in ${WORKERS} processes`);
        results.waiters.push(await waiters(harness, server, lib, n, waitSeconds).catch((e) => ({ lib, n, error: e.message.split('\n')[0] })));
        save();
      }
    }
    if (results.waiters.length) console.log(`\n### (b) waiters on distinct held keys, ${WORKERS} processes, ${waitSeconds} s window while waiting, released ${RELEASE_RATE > 0 ? `${fmt(RELEASE_RATE)} a second at most` : 'as fast as the holder can'}\n\n${waitersTable(results.waiters)}`);
  } finally {
    harness.disconnect();
    await server.stop();
  }
  const { drawScaleChart } = await import('./lib/scale-chart.mjs');
  const chart = path.join(path.dirname(here), 'results', 'scale-chart.svg');
  if (results.held.some((r) => !r.error)) {
    writeFileSync(chart, drawScaleChart(results));
    log(`chart written to ${path.relative(process.cwd(), chart)}`);
  }
}

const roleAt = process.argv.indexOf('--role');
if (roleAt > 0) {
  const { runRole } = await import('./lib/scale-roles.mjs');
  await runRole(process.argv[roleAt + 1]);
} else {
  await main();
}
