// How much optimized code a full GC throws away in a process that uses latchkey: V8 holds the
// shapes (maps) of a class's objects weakly, so a full GC that finds none of them alive clears
// them, and every optimized function that embeds one is deoptimized ("reason: weak objects" in
// `node --trace-deopt`) and must be optimized again. latchkey keeps its last waiter, lease, bounded
// call and ioredis command alive for that (src/manager/last-made.ts).
//
// Each case runs in a child `node --expose-gc --trace-deopt`, on a private redis-server, for PAIRS
// acquire+release pairs (default 60,000), with a full GC (`gc()`) every GC_EVERY pairs (default
// 10,000), at a moment when no call is in flight and no lease is held; it counts the functions
// marked for deoptimization for "weak objects" after each GC but the first (warm-up: code
// optimized before it may embed shapes of start-up objects), and prints their median and which
// functions they were (those of Node's own internals apart).
//   lone      one manager, sequential pairs on 4 keys: the uncontended path
//   handoff   two managers in the process, one key: each pair's acquire waits for the other's
//             release (a notified hand-off through the inbox)
// Usage: npm run build && node bench/weak-deopts.mjs
// DEOPT_BUILDS: comma-separated builds' index.js to compare in one run (copies of dist inside the
// repository, as LATCHKEY_DIST), default this repository's dist; BENCH_CLIENTS=6|5: the ioredis major.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { clientsLine, importIoredis } from './lib/clients.mjs';
import { startRedisServer } from './lib/redis-server.mjs';
import { median } from './lib/stats.mjs';

const PAIRS = Number(process.env.PAIRS || 60_000);
const GC_EVERY = Number(process.env.GC_EVERY || 10_000);
const here = fileURLToPath(import.meta.url);

if (process.argv[2] === '--worker') {
  const [, , , kind, port, build] = process.argv;
  const { Redis } = await importIoredis();
  const { createLocks } = await import(build);
  const clients = [new Redis(Number(port), '127.0.0.1'), new Redis(Number(port), '127.0.0.1')];
  const prefix = `deopts${process.pid}:`;
  const managers = clients.map((redis) => createLocks({ redis, prefix }));
  const gcAt = (i) => {
    if (i % GC_EVERY !== GC_EVERY - 1) return;
    console.log('--- gc');
    globalThis.gc();
  };
  if (kind === 'lone') {
    for (let i = 0; i < PAIRS; i++) {
      const lease = await managers[0].acquire(`k${i % 4}`);
      await lease.release();
      gcAt(i);
    }
  } else {
    // Two managers take turns on one key: each acquire is queued behind the other's lease.
    let lease = await managers[0].acquire('handoff');
    for (let i = 0; i < PAIRS; i++) {
      const next = managers[(i + 1) % 2].acquire('handoff', { wait: 10_000 });
      await lease.release();
      lease = await next;
      if (i % GC_EVERY === GC_EVERY - 1) {
        await lease.release();
        console.log('--- gc');
        globalThis.gc();
        lease = await managers[(i + 1) % 2].acquire('handoff');
      }
    }
    await lease.release();
  }
  await Promise.all(managers.map((m) => m.close()));
  for (const c of clients) c.disconnect();
  process.exit(0);
}

/** Runs one case in a child; returns the weak-objects deopts after each GC, and the functions. */
function runCase(kind, port, build) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--expose-gc', '--trace-deopt', here, '--worker', kind, String(port), build], { stdio: ['ignore', 'pipe', 'inherit'] });
    const perGc = [];
    const functions = new Map();
    let buffer = '';
    child.stdout.on('data', (chunk) => {
      buffer += chunk;
      let nl;
      while ((nl = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        if (line.startsWith('--- gc')) perGc.push(0);
        else if (line.includes('reason: weak objects') && perGc.length > 1) {
          const name = /SharedFunctionInfo ([^>]*)>/.exec(line)?.[1] || '(anonymous)';
          perGc[perGc.length - 1]++;
          functions.set(name, (functions.get(name) ?? 0) + 1);
        }
      }
    });
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve({ perGc: perGc.slice(1), functions }) : reject(new Error(`${kind} worker exited with ${code}`))));
  });
}

// Node's own functions (its promise and iterator internals) are not latchkey's to keep.
const NODE_INTERNALS = new Set(['processPromiseRejections', 'SafeIterator', 'next', 'processTicksAndRejections', 'nextTick']);

const builds = (process.env.DEOPT_BUILDS ? process.env.DEOPT_BUILDS.split(',') : [new URL('../dist/index.js', import.meta.url).href]).map((b) =>
  b.startsWith('file:') ? b : pathToFileURL(path.resolve(b)).href,
);
process.stderr.write(`[weak-deopts] ${clientsLine(['ioredis'])}; ${PAIRS} pairs, gc() every ${GC_EVERY}\n`);
const server = await startRedisServer();
try {
  for (const kind of ['lone', 'handoff']) {
    for (const build of builds) {
      const { perGc, functions } = await runCase(kind, server.port, build);
      const ours = [...functions].filter(([name]) => !NODE_INTERNALS.has(name));
      const theirs = [...functions].filter(([name]) => NODE_INTERNALS.has(name)).reduce((n, [, c]) => n + c, 0);
      console.log(`${kind.padEnd(8)} ${path.relative(process.cwd(), fileURLToPath(build))}: weak-objects deopts per gc, median ${median(perGc)} (${perGc.join(' ')}); Node internals ${theirs} in all`);
      if (ours.length) console.log(`         ${ours.map(([name, n]) => `${name} ${n}`).join(', ')}`);
    }
  }
} finally {
  await server.stop();
}
