// latchkey demo: several worker processes contend for ONE lock and, inside the critical section,
// increment a shared counter with a deliberately racy read -> await -> write. Because the lock
// excludes them, no update is lost (counter == acquisitions), and every acquisition's fencing token
// is greater than the one before. Uses only the public API of the built package (dist/).
//
// Run:  npm run demo                       (builds dist/ first)
//       node examples/demo.mjs [--workers 4] [--seconds 6] [--iterations N]
//         --iterations N: each worker acquires N times instead of running for --seconds.
//
// Where the lock and the counter live (the first that works):
//   1. REDIS_URL, if set. It must answer PING, or the demo stops with exit code 1.
//   2. redis://127.0.0.1:6379, if it answers PING within 1 s.
//        LATCHKEY_DEMO_DEFAULT_URL=<url> probes another address instead (e.g. redis://127.0.0.1:1
//        to see the unreachable path); LATCHKEY_DEMO_SKIP_DEFAULT=1 skips this step.
//   3. A throwaway redis-server on a free port, if redis-server is on PATH (no persistence);
//        it is killed by pid at the end. LATCHKEY_DEMO_NO_SPAWN=1 skips this step.
//   4. The in-memory backend: the workers become async tasks in this one process, sharing one
//        createMemoryStore(), and the counter is a plain variable.
// Try the fallbacks while a local Redis runs:
//   LATCHKEY_DEMO_DEFAULT_URL=redis://127.0.0.1:1 npm run demo         -> starts its own redis-server
//   LATCHKEY_DEMO_SKIP_DEFAULT=1 LATCHKEY_DEMO_NO_SPAWN=1 npm run demo -> in memory
//
// On Redis, each worker keeps: the counter in a plain key (GET, then SET after a random delay), the
// fences in a list (RPUSH, in acquisition order), and the counter's value in a fenced resource with
// locks.fencedWrite(), which rejects with StaleFenceError if a fence ever went backwards.
// All keys live under a random prefix `demo:<hex>:` and are deleted at the end.
// Exit code: 0 when every check passes, 1 otherwise (2 for a bad flag, 130 when interrupted; a first
// Ctrl-C lets the workers finish their current turn and still checks and cleans up).
//
// This file is the entry point (and, forked with --worker, each worker process); its parts are in
// examples/demo/: find-redis.mjs (steps 1-3 above, and deleting the keys), report.mjs (the checks
// and the progress line) and helpers.mjs.
import { fork } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { createLocks, createMemoryStore } from '../dist/index.js';
import { chooseRedis, deleteKeys, stopServer } from './demo/find-redis.mjs';
import { describe, REDIS_OPTIONS } from './demo/helpers.mjs';
import { Progress, verdict } from './demo/report.mjs';

const LOCK = 'counter';
const LEASE_TTL = 5_000; // ms; a critical section lasts a few ms
const ACQUIRE_WAIT = 30_000; // ms; the longest a worker waits for its turn
/** The worker processes still running, to stop on Ctrl-C. */
const children = new Set();
/** Set on Ctrl-C: no new acquisitions start, and the demo exits 130. */
let interrupted = false;

// ---------------------------------------------------------------------------------------------
// The critical section, shared by the process workers (Redis) and the in-process tasks (memory).

/**
 * Acquires the lock again and again until `deadline` (or `iterations` times), each time reading
 * the counter, yielding for 0-3 ms, and writing counter + 1. Returns the number of acquisitions.
 * @param {object} w
 * @param {import('../dist/index.js').Locks} w.locks
 * @param {{ read(): Promise<number>, write(n: number): Promise<void>, recordFence(f: number): Promise<void> }} w.counter
 * @param {string} w.resource  the key fencedWrite() guards
 * @param {number} w.deadline  Date.now() value after which no new acquisition starts
 * @param {number} w.iterations  > 0: stop after this many instead
 * @param {(fence: number) => void} w.onAcquired  called after each completed acquisition
 */
async function work({ locks, counter, resource, deadline, iterations, onAcquired }) {
  let done = 0;
  while (!interrupted && (iterations > 0 ? done < iterations : Date.now() < deadline)) {
    const lease = await locks.acquire(LOCK, { ttl: LEASE_TTL, wait: ACQUIRE_WAIT });
    try {
      const value = await counter.read();
      await sleep(randomInt(4)); // without the lock, another worker would read the same value here
      await counter.write(value + 1);
      await counter.recordFence(lease.fence);
      await locks.fencedWrite(resource, String(value + 1), lease); // StaleFenceError on an old fence
    } catch (error) {
      await lease.release().catch(() => {});
      throw error;
    }
    await lease.release(); // LeaseLostError if the lease ran out during the critical section
    done++;
    onAcquired(lease.fence);
  }
  return done;
}

/** The keys of one run, all under its own prefix. */
function runKeys(prefix) {
  return { counter: `${prefix}counter`, fences: `${prefix}fences`, resource: `${prefix}resource` };
}

// ---------------------------------------------------------------------------------------------
// Worker process (Redis): forked by main() with its settings in LATCHKEY_DEMO_WORKER. It connects,
// says `ready`, waits for `start` (so that all workers begin together), works, and reports `done`.

async function workerProcess() {
  const { url, prefix, iterations } = JSON.parse(process.env.LATCHKEY_DEMO_WORKER ?? '{}');
  const keys = runKeys(prefix);
  const parentGone = () => process.exit(1);
  process.once('disconnect', parentGone);
  const finishUp = () => void (interrupted = true); // Ctrl-C, or the parent's SIGTERM: end the loop cleanly
  process.on('SIGINT', finishUp);
  process.on('SIGTERM', finishUp);
  const client = new Redis(url, REDIS_OPTIONS);
  client.on('error', () => {}); // failures surface as rejected commands
  let locks;
  let message;
  try {
    await client.connect();
    locks = createLocks({ redis: client, prefix });
    const counter = {
      read: async () => Number((await client.get(keys.counter)) ?? 0),
      write: async (n) => void (await client.set(keys.counter, String(n))),
      recordFence: async (fence) => void (await client.rpush(keys.fences, String(fence))),
    };
    const started = new Promise((resolve) => process.once('message', (m) => resolve(m.deadline)));
    process.send?.({ type: 'ready' });
    const deadline = await started;
    const onAcquired = (fence) => process.send?.({ type: 'acquired', fence });
    const count = await work({ locks, counter, resource: keys.resource, deadline, iterations, onAcquired });
    message = { type: 'done', count };
  } catch (error) {
    message = { type: 'failed', error: describe(error) };
    process.exitCode = 1;
  }
  await locks?.close().catch(() => {});
  client.disconnect();
  await new Promise((resolve) => process.send?.(message, resolve) ?? resolve());
  process.off('disconnect', parentGone);
  process.disconnect?.();
}

// ---------------------------------------------------------------------------------------------
// Parent.

async function main() {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        workers: { type: 'string', default: '4' },
        seconds: { type: 'string', default: '6' },
        iterations: { type: 'string', default: '0' },
      },
    }));
  } catch (error) {
    console.error(`${describe(error)}\nusage: node examples/demo.mjs [--workers 4] [--seconds 6] [--iterations N]`);
    return 2;
  }
  const workers = positiveInt(values.workers, '--workers', 1);
  const seconds = positiveInt(values.seconds, '--seconds', 1);
  const iterations = positiveInt(values.iterations, '--iterations', 0);
  const prefix = `demo:${randomBytes(4).toString('hex')}:`;
  const plan = iterations > 0 ? `${iterations} acquisitions each` : `${seconds} s`;

  console.log(`latchkey demo: ${workers} workers share ONE lock; a racy read-await-write increment inside it loses no update, and fences only grow.`);

  let redis;
  try {
    redis = await chooseRedis();
  } catch (error) {
    console.error(`error: ${error instanceof Error ? error.message : String(error)}`);
    return 1;
  }
  const stopSignals = onInterrupt(
    () => {
      for (const child of children) child.kill('SIGTERM');
    },
    () => redis?.server?.kill('SIGKILL'),
  );
  try {
    if (!redis) {
      console.log(`backend: in memory (no Redis reachable), ${workers} async tasks in this process, ${plan}, prefix ${prefix}`);
      const code = await runInMemory({ workers, seconds, iterations, prefix });
      return interrupted ? 130 : code;
    }
    console.log(`backend: Redis at ${redis.label}, ${workers} worker processes, ${plan}, prefix ${prefix}`);
    const code = await runOnRedis({ client: redis.client, url: redis.url, workers, seconds, iterations, prefix });
    return interrupted ? 130 : code;
  } finally {
    stopSignals();
    if (redis) {
      await deleteKeys(redis.client, prefix).catch((error) => console.error(`could not delete the demo keys: ${describe(error)}`));
      redis.client.disconnect();
    }
    if (redis?.server) await stopServer(redis.server);
  }
}

/** Forks the workers, shows progress once a second, then checks what they left in Redis. */
async function runOnRedis({ client, url, workers, seconds, iterations, prefix }) {
  const keys = runKeys(prefix);
  const progress = new Progress(workers);
  const self = fileURLToPath(import.meta.url);
  const env = { ...process.env, LATCHKEY_DEMO_WORKER: JSON.stringify({ url, prefix, iterations }) };
  const forked = Array.from({ length: workers }, (_, id) => {
    const child = fork(self, ['--worker'], { env, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    children.add(child);
    const result = { id, count: undefined, error: undefined };
    let markReady;
    const ready = new Promise((resolve) => (markReady = resolve));
    child.on('message', (m) => {
      if (m.type === 'ready') markReady();
      else if (m.type === 'acquired') progress.acquired(id, m.fence);
      else if (m.type === 'done') result.count = m.count;
      else if (m.type === 'failed') result.error = m.error;
    });
    const exited = new Promise((resolve) => {
      child.on('error', (error) => (result.error ??= describe(error)));
      child.on('exit', (code, signal) => {
        children.delete(child);
        if (result.error === undefined && code !== 0) result.error = `exited with ${signal ?? `code ${code}`}`;
        markReady();
        resolve(result);
      });
    });
    return { child, ready, exited };
  });
  await Promise.all(forked.map((w) => w.ready)); // each connected (or already failed)
  const deadline = Date.now() + seconds * 1000;
  for (const { child } of forked) if (child.connected) child.send({ type: 'start', deadline });
  progress.start();
  const finished = await Promise.all(forked.map((w) => w.exited));
  progress.stop();

  const counter = Number((await client.get(keys.counter)) ?? 0);
  const fences = (await client.lrange(keys.fences, 0, -1)).map(Number);
  const locks = createLocks({ redis: client, prefix });
  const resource = await locks.fencedRead(keys.resource);
  await locks.close();
  return verdict({ finished, progress, counter, fences, resource });
}

/** The same workers as async tasks in this process, on one shared in-memory store. */
async function runInMemory({ workers, seconds, iterations, prefix }) {
  const keys = runKeys(prefix);
  const store = createMemoryStore();
  const shared = { counter: 0, fences: [] };
  const counter = {
    read: async () => shared.counter,
    write: async (n) => void (shared.counter = n),
    recordFence: async (fence) => void shared.fences.push(fence),
  };
  const progress = new Progress(workers);
  const deadline = Date.now() + seconds * 1000;
  const managers = Array.from({ length: workers }, () => createLocks({ memory: store, prefix }));
  progress.start();
  const finished = await Promise.all(
    managers.map(async (locks, id) => {
      const result = { id, count: undefined, error: undefined };
      try {
        const onAcquired = (fence) => progress.acquired(id, fence);
        result.count = await work({ locks, counter, resource: keys.resource, deadline, iterations, onAcquired });
      } catch (error) {
        result.error = describe(error);
      }
      return result;
    }),
  );
  progress.stop();
  const resource = await managers[0].fencedRead(keys.resource);
  await Promise.all(managers.map((locks) => locks.close()));
  return verdict({ finished, progress, counter: shared.counter, fences: shared.fences, resource });
}

// ---------------------------------------------------------------------------------------------
// Small helpers.

/**
 * On the first Ctrl-C or SIGTERM: stop the workers (`stop`), so that the run ends early and still
 * cleans up its keys and server. On the second: `kill` (our redis-server) and exit 130 at once.
 * Returns an unsubscribe.
 */
function onInterrupt(stop, kill) {
  const handler = () => {
    if (!interrupted) {
      interrupted = true;
      console.log('interrupted: stopping the workers (again to quit at once)');
      stop();
      return;
    }
    kill();
    process.exit(130);
  };
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
  return () => {
    process.off('SIGINT', handler);
    process.off('SIGTERM', handler);
  };
}

function positiveInt(text, name, min) {
  const n = Number(text);
  if (!Number.isInteger(n) || n < min) {
    console.error(`${name} must be an integer >= ${min}, got ${JSON.stringify(text)}`);
    process.exit(2);
  }
  return n;
}

// ---------------------------------------------------------------------------------------------
// Entry point (last, so that everything above is initialised): a forked worker, or the parent.

if (process.argv[2] === '--worker') {
  await workerProcess();
} else {
  process.exitCode = await main();
}
