// Where a hand-off between processes spends its time: scenario 1's loop (8 processes, one key, 1 ms
// of busy work while holding), once with the smallest lock that passes between processes (the
// ring of bench/ring.mjs), once with latchkey's scripts and nothing around them (its `scripts`
// row) and once with latchkey, ROUNDS times each (default 2), BENCH_SECONDS
// each (default 4). Every worker timestamps its own socket traffic (net.Socket's write, uncork
// and 'data' events, and its subscriber connection's 'message' events; one monotonic clock for
// all processes), and each hand-off to another process is cut into four phases:
//   releaser   release() called -> the releasing process's first socket write
//   redis      that write -> the last socket data the next holder received before it held the lock
//              (the script in Redis, the message to the waiter, the waiter's wake-up)
//   ioredis    that data -> the subscriber's 'message' event (the driver's parsing)
//   lock       the 'message' event -> acquire() resolved (the lock library's own code)
// and the CPU time (user + system, process.cpuUsage) the next holder's process spent in its lock
// phase: time it ran, not time it waited for a core.
// TRACE_PROFILE=<dir> (e.g. /tmp/prof) profiles every worker (node --cpu-prof, a sample every 10
// µs, in a new directory under <dir>) and prints, per row, the functions the next holder's process
// ran in its lock phases: the profile's samples that fall between each 'message' event and the
// acquire() it resolved (lib/lock-profile.mjs). The profiler slows every row down: compare shares.
// It prints p50 and p99 of each in µs. The timestamps cost time too: compare the two rows, not
// the totals with bench/ring.mjs. Usage: npm run build && node bench/trace-handoff.mjs
// LATCHKEY_DIST=bench/dist-a/index.js traces another build of latchkey (a copy of its dist inside
// the repository); LATCHKEY_DIST=dist/index.js,bench/dist-a/index.js traces both, a row each, in
// turn in every round, and prints each build's lock phase over the scripts' of the same round (the
// median over the rounds): builds compared in one run, the machine's speed of each round taken
// out. BENCH_CLIENTS=6|5: the ioredis major (lib/clients.mjs, 6 by default).
// Marks inside the lock phase: a build whose code calls `globalThis.__latchkeyMark?.('name')` (a
// copy in bench/dist-a with calls added by hand, never committed) gets, per mark, the p50 and p99
// of its time after the 'message' event that handed the lock over, in the hand-offs it marked.
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { clientsLine, importIoredis } from './lib/clients.mjs';
import { now, spin } from './lib/clock.mjs';
import { latchkeyModule } from './lib/latchkey-module.mjs';
import { startRedisServer } from './lib/redis-server.mjs';
import { printProfile, profileWindows, windowsFile } from './lib/lock-profile.mjs';
import { joinRing, joinScripts, runWorkers } from './lib/ring.mjs';
import { median, summarize } from './lib/stats.mjs';
import { onSubscriberMessages } from './lib/subscriber-messages.mjs';

const SECONDS = Number(process.env.BENCH_SECONDS || 4);
/** A row's name as its workers' profile windows are filed under (TRACE_ROW; a build's path has slashes). */
const rowFileName = (row) => row.replace(/[^\w.-]+/g, '_');
const ROUNDS = Number(process.env.ROUNDS || 2);
const PROCESSES = 8;
const WARMUP_MS = 1000;
// TRACE_PROFILE=<dir>: the workers run with a V8 CPU profile in a new directory under <dir>.
const PROFILE_DIR = process.env.TRACE_PROFILE;

/** This process's CPU time so far (user + system), µs. */
function cpuNow() {
  const { user, system } = process.cpuUsage();
  return user + system;
}

if (process.argv[2] === '--worker') {
  const [, , , kind, port, index, endAt] = process.argv;
  const i = Number(index);
  let lastData = 0;
  let lastMessage = 0;
  let cpuAtMessage = 0;
  let firstWrite = 0;
  let watching = false;
  const noteWrite = () => {
    if (watching) {
      watching = false;
      firstWrite = now();
    }
  };
  const { write, uncork, emit } = net.Socket.prototype;
  net.Socket.prototype.write = function (...args) {
    noteWrite();
    return write.apply(this, args);
  };
  net.Socket.prototype.uncork = function (...args) {
    noteWrite();
    return uncork.apply(this, args);
  };
  net.Socket.prototype.emit = function (event, ...args) {
    if (event === 'data') lastData = now();
    return emit.call(this, event, ...args);
  };
  const { Redis } = await importIoredis();
  onSubscriberMessages(Redis, () => {
    lastMessage = now();
    cpuAtMessage = cpuNow();
  });
  const client = new Redis(Number(port), '127.0.0.1');
  const records = []; // [acquiredAt, lastData, lastMessage, releaseCalledAt, firstWrite, marks, lock CPU]
  const windows = []; // [message, acquired] in µs of the monotonic clock, for TRACE_PROFILE
  const base = process.env.BENCH_BASE ? Number(BigInt(process.env.BENCH_BASE) / 1000n) : 0;
  let lastAcquired = 0;
  let marks = {};
  globalThis.__latchkeyMark = (name) => {
    marks[name] = now();
  };
  /** The lock is held: its record so far, then 1 ms of work (the caller then releases and calls `note`). */
  const hold = () => {
    const record = [now(), lastData, lastMessage];
    // A lock phase when a message came since the last hold (not a lock taken by an attempt).
    if (lastMessage > lastAcquired) windows.push([base + lastMessage * 1000, base + record[0] * 1000]);
    lastAcquired = record[0];
    const lockCpu = (cpuNow() - cpuAtMessage) / 1000;
    const marked = marks;
    marks = {};
    spin(1);
    record.push(now());
    watching = true;
    return Object.assign(record, { marked, lockCpu });
  };
  /** The release was sent: the record is complete. */
  const note = (record) => {
    record.push(firstWrite, record.marked, record.lockCpu);
    records.push(record);
  };
  if (kind === 'ring') {
    const ring = await joinRing(client, i, PROCESSES, Number(endAt));
    process.send('ready');
    const loop = (async () => {
      for (;;) {
        const token = await ring.turn();
        const record = hold();
        const passed = ring.pass(token);
        note(record);
        if (await passed) break; // the ring's last round (see joinRing)
      }
      ring.leave();
    })();
    if (i === 0) process.once('message', () => void ring.start());
    await loop;
  } else if (kind === 'scripts') {
    const lock = await joinScripts(client, i);
    process.send('ready');
    await new Promise((resolve) => process.once('message', resolve));
    while (now() < Number(endAt)) {
      await lock.acquire();
      const record = hold();
      await lock.release();
      note(record);
    }
    lock.leave();
  } else {
    const { createLocks } = await import(latchkeyModule());
    const locks = createLocks({ redis: client, prefix: 'trace:' });
    await client.ping();
    process.send('ready');
    await new Promise((resolve) => process.once('message', resolve));
    while (now() < Number(endAt)) {
      const lease = await locks.acquire('k', { ttl: 10_000 });
      const record = hold();
      await lease.release(); // its write goes out on the next tick (latchkey coalesces writes)
      note(record);
    }
    await locks.close();
  }
  const runDir = process.env.TRACE_PROFILE_RUN;
  if (runDir) fs.writeFileSync(windowsFile(runDir, process.env.TRACE_ROW ?? kind, process.pid), JSON.stringify(windows));
  process.send(records, () => {
    client.disconnect();
    process.exit(0);
  });
} else {
  console.log(clientsLine(['ioredis']));
  if (PROFILE_DIR) {
    fs.mkdirSync(PROFILE_DIR, { recursive: true });
    const runDir = fs.mkdtempSync(path.join(PROFILE_DIR, 'trace-'));
    process.env.TRACE_PROFILE_RUN = runDir; // the workers inherit it
    process.env.RING_NODE_ARGS = `--cpu-prof --cpu-prof-dir=${runDir} --cpu-prof-interval=10`;
  }
  const server = await startRedisServer();
  const here = fileURLToPath(import.meta.url);
  // One latchkey row per build of LATCHKEY_DIST (comma-separated: builds side by side, in turn in
  // each round); its workers load that build (lib/latchkey-module.mjs reads the variable they inherit).
  const builds = (process.env.LATCHKEY_DIST ?? '').split(',').filter(Boolean);
  const latchkeyRows = builds.length > 1 ? builds.map((build) => [`latchkey ${build}`, build]) : [['latchkey', builds[0]]];
  const phases = { ring: [], scripts: [], ...Object.fromEntries(latchkeyRows.map(([row]) => [row, []])) };
  const builtFrom = new Map(latchkeyRows);
  const lockP50s = new Map(); // row -> its lock phase's p50 in each round, ms
  const markTimes = new Map(); // mark (with its row, when there are several builds) -> its times after the 'message' event, ms
  try {
    for (let round = 0; round < ROUNDS; round++) {
      for (const row of Object.keys(phases)) {
        const kind = builtFrom.has(row) ? 'latchkey' : row;
        if (builtFrom.get(row) === undefined) delete process.env.LATCHKEY_DIST;
        else process.env.LATCHKEY_DIST = builtFrom.get(row);
        process.env.TRACE_ROW = rowFileName(row);
        const startAt = now() + 1500;
        const endAt = startAt + WARMUP_MS + SECONDS * 1000;
        const messages = await runWorkers(here, PROCESSES, (i) => ['--worker', kind, String(server.port), String(i), String(endAt)], endAt);
        const roundLocks = [];
        const all = messages.flatMap((records, p) => records.map((r) => [...r, p])).sort((a, b) => a[0] - b[0]);
        for (let k = 1; k < all.length; k++) {
          const [acquiredAt, data, message, , , marked, lockCpu, holder] = all[k];
          const [, , , releaseAt, write, , , previous] = all[k - 1];
          if (acquiredAt < startAt + WARMUP_MS || holder === previous || !write) continue;
          for (const [name, at] of Object.entries(marked ?? {})) {
            if (at < message || at > acquiredAt) continue;
            const key = builds.length > 1 ? `${row}: ${name}` : name;
            if (!markTimes.has(key)) markTimes.set(key, []);
            markTimes.get(key).push(at - message);
          }
          roundLocks.push(acquiredAt - message);
          phases[row].push({ releaser: write - releaseAt, redis: data - write, ioredis: message - data, lock: acquiredAt - message, lockCpu, total: acquiredAt - releaseAt });
        }
        if (!lockP50s.has(row)) lockP50s.set(row, []);
        lockP50s.get(row).push(summarize(roundLocks).p50);
      }
    }
  } finally {
    await server.stop();
  }
  const µs = (x) => String(Math.round(x * 1000)).padStart(5);
  console.log(`| hand-offs to another process, µs | n | releaser p50/p99 | redis p50/p99 | ioredis p50/p99 | lock p50/p99 | lock CPU p50/p99 | total p50/p99 |`);
  console.log('| --- | --: | --: | --: | --: | --: | --: | --: |');
  for (const [kind, rows] of Object.entries(phases)) {
    const cell = (name) => {
      const s = summarize(rows.map((r) => r[name]));
      return `${µs(s.p50)} / ${µs(s.p99)}`;
    };
    const label = { ring: 'ring (the smallest lock)', scripts: "scripts (latchkey's Lua, nothing around it)" }[kind] ?? kind;
    console.log(`| ${label} | ${rows.length} | ${cell('releaser')} | ${cell('redis')} | ${cell('ioredis')} | ${cell('lock')} | ${cell('lockCpu')} | ${cell('total')} |`);
  }
  // The lock phase over the scripts' in the same round: what the lock's own code adds, with the
  // machine's speed of that round taken out (rows of one round run within seconds of each other).
  console.log(`\nlock phase p50 over the scripts' of the same round, µs (median of ${ROUNDS} rounds; each round's in brackets):`);
  for (const [row] of latchkeyRows) {
    const over = lockP50s.get(row).map((p50, r) => p50 - lockP50s.get('scripts')[r]);
    console.log(`  ${row}: ${µs(median(over)).trim()} (${over.map((x) => µs(x).trim()).join(', ')})`);
  }
  if (markTimes.size > 0) {
    console.log('\n| mark (after the message event), µs | n | p50 | p99 |\n| --- | --: | --: | --: |');
    const byMedian = [...markTimes].map(([name, times]) => [name, times.length, summarize(times)]).sort((a, b) => a[2].p50 - b[2].p50);
    for (const [name, n, s] of byMedian) console.log(`| ${name} | ${n} | ${µs(s.p50)} | ${µs(s.p99)} |`);
  }
  if (process.env.TRACE_PROFILE_RUN) {
    const profiles = Object.keys(phases).map((row) => [row, profileWindows(process.env.TRACE_PROFILE_RUN, rowFileName(row))]);
    for (const [kind, result] of profiles) printProfile(`${kind}, lock phase (profiles in ${process.env.TRACE_PROFILE_RUN})`, result, profiles[0][1]);
  }
}
