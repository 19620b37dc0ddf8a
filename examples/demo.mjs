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
import { execFileSync, fork, spawn } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { createLocks, createMemoryStore } from '../dist/index.js';

const LOCK = 'counter';
const LEASE_TTL = 5_000; // ms; a critical section lasts a few ms
const ACQUIRE_WAIT = 30_000; // ms; the longest a worker waits for its turn
const DEFAULT_URL = process.env.LATCHKEY_DEMO_DEFAULT_URL || 'redis://127.0.0.1:6379';
/** The worker processes still running, to stop on Ctrl-C. */
const children = new Set();
/** Set on Ctrl-C: no new acquisitions start, and the demo exits 130. */
let interrupted = false;
/** Fail fast instead of reconnecting forever when a server is down. */
const REDIS_OPTIONS = { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null, connectTimeout: 1000 };

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

/** Prints one line per check and PASS or FAIL; returns the exit code. */
function verdict({ finished, progress, counter, fences, resource }) {
  const checks = [];
  const check = (ok, text) => checks.push({ ok, text });
  for (const { id, error } of finished) {
    if (error !== undefined) check(false, `worker ${id} failed: ${error}`);
  }
  const total = finished.reduce((sum, r) => sum + (r.count ?? progress.counts[r.id]), 0);
  const per = finished.map((r) => r.count ?? progress.counts[r.id]).join(' + ');
  check(total > 0, `${total} acquisition${total === 1 ? '' : 's'} in all (${per})`);
  check(counter === total, `counter ${counter} ${counter === total ? '==' : '!='} ${total} acquisitions${counter === total ? '' : ` (${total - counter} updates lost)`}`);
  const backwards = fences.findIndex((f, i) => i > 0 && !(f > fences[i - 1]));
  if (fences.length !== total) {
    check(false, `${fences.length} fences recorded for ${total} acquisitions`);
  } else if (backwards !== -1) {
    check(false, `fences not strictly increasing: #${backwards} is ${fences[backwards]} after ${fences[backwards - 1]}`);
  } else {
    check(total > 0, `${fences.length} fences strictly increasing in acquisition order (${fences[0]} .. ${fences.at(-1)})`);
  }
  const expected = { value: String(counter), fence: fences.at(-1) };
  const resourceOk = total === 0 || (resource?.value === expected.value && resource?.fence === expected.fence);
  check(
    resourceOk,
    resource
      ? `fenced resource holds ${resource.value} at fence ${resource.fence}${resourceOk ? '' : ` (expected ${expected.value} at ${expected.fence})`}`
      : 'fenced resource was never written',
  );

  console.log('verdict:');
  for (const { ok, text } of checks) console.log(`  ${ok ? 'ok  ' : 'FAIL'} ${text}`);
  const passed = checks.every((c) => c.ok);
  console.log(passed ? 'PASS' : 'FAIL');
  return passed ? 0 : 1;
}

/** Acquisitions per worker and the last fence, printed once a second. */
class Progress {
  constructor(workers) {
    this.counts = new Array(workers).fill(0);
    this.lastFence = undefined;
    this.started = 0;
    this.timer = undefined;
  }
  acquired(id, fence) {
    this.counts[id]++;
    this.lastFence = fence;
  }
  start() {
    this.started = Date.now();
    this.timer = setInterval(() => this.print(), 1000);
  }
  stop() {
    clearInterval(this.timer);
  }
  print() {
    const elapsed = Math.round((Date.now() - this.started) / 1000);
    const per = this.counts.map((n, i) => `w${i} ${String(n).padStart(4)}`).join('  ');
    const total = this.counts.reduce((a, b) => a + b, 0);
    console.log(`  ${String(elapsed).padStart(3)}s  ${per}  total ${String(total).padStart(5)}  last fence ${this.lastFence ?? '-'}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Finding a Redis.

/**
 * Returns `{ client, url, label, server? }` for the first Redis that answers (see the header), or
 * undefined when there is none and the demo should run in memory. Throws when REDIS_URL is set but
 * does not answer.
 */
async function chooseRedis() {
  if (process.env.REDIS_URL) {
    const url = process.env.REDIS_URL;
    try {
      return { client: await connect(url), url, label: `${redact(url)} (REDIS_URL)` };
    } catch (error) {
      throw new Error(`REDIS_URL ${redact(url)} does not answer: ${describe(error)}`);
    }
  }
  if (process.env.LATCHKEY_DEMO_SKIP_DEFAULT === '1') {
    console.log(`skipping ${redact(DEFAULT_URL)} (LATCHKEY_DEMO_SKIP_DEFAULT=1)`);
  } else {
    try {
      return { client: await connect(DEFAULT_URL), url: DEFAULT_URL, label: redact(DEFAULT_URL) };
    } catch (error) {
      console.log(`no Redis at ${redact(DEFAULT_URL)} (${describe(error)})`);
    }
  }
  if (process.env.LATCHKEY_DEMO_NO_SPAWN === '1') {
    console.log('not starting a redis-server (LATCHKEY_DEMO_NO_SPAWN=1)');
  } else if (!hasRedisServer()) {
    console.log('redis-server is not on PATH');
  } else {
    const { server, url } = await startServer();
    try {
      return { client: await connect(url), url, label: `${url} (own redis-server, pid ${server.pid})`, server };
    } catch (error) {
      await stopServer(server);
      throw error;
    }
  }
  return undefined;
}

/** Connects and PINGs, failing within about a second when nothing answers. */
async function connect(url) {
  const client = new Redis(url, REDIS_OPTIONS);
  let lastError;
  client.on('error', (error) => (lastError = error));
  try {
    await client.connect();
    await client.ping();
    return client;
  } catch (error) {
    client.disconnect();
    throw lastError ?? error;
  }
}

function hasRedisServer() {
  try {
    execFileSync('redis-server', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** Starts redis-server on a free loopback port without persistence and waits until it answers. */
async function startServer() {
  const port = await freePort();
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'];
  const server = spawn('redis-server', args, { stdio: 'ignore' });
  const exited = new Promise((resolve) => server.once('exit', (code, signal) => resolve(signal ?? `code ${code}`)));
  const url = `redis://127.0.0.1:${port}`;
  console.log(`starting redis-server on port ${port} (pid ${server.pid})`);
  for (let waited = 0; waited < 5_000; waited += 100) {
    const exit = await Promise.race([exited, sleep(100)]);
    if (exit !== undefined) throw new Error(`redis-server exited at start (${exit})`);
    const client = await connect(url).catch(() => undefined);
    if (client) {
      client.disconnect();
      return { server, url };
    }
  }
  await stopServer(server);
  throw new Error(`redis-server on port ${port} did not answer within 5 s`);
}

/** Kills the redis-server this demo started, by its pid, and waits for it to exit. */
async function stopServer(server) {
  if (server.exitCode !== null || server.signalCode !== null) return;
  const exited = new Promise((resolve) => server.once('exit', resolve));
  process.kill(server.pid, 'SIGTERM');
  if ((await Promise.race([exited.then(() => true), sleep(3_000)])) !== true) process.kill(server.pid, 'SIGKILL');
  await exited;
  console.log(`stopped redis-server (pid ${server.pid})`);
}

function freePort() {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.on('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

/** Deletes every key of this run (the lock's own keys included). */
async function deleteKeys(client, prefix) {
  let cursor = '0';
  let deleted = 0;
  do {
    const [next, found] = await client.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 500);
    cursor = next;
    if (found.length > 0) deleted += await client.unlink(...found);
  } while (cursor !== '0');
  console.log(`deleted ${deleted} demo key${deleted === 1 ? '' : 's'} (${prefix}*)`);
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

/** A URL without its password, for printing. */
function redact(url) {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparsable URL)';
  }
}

/** An error's name and message, never a stack or a lease token. */
function describe(error) {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  return String(error);
}

// ---------------------------------------------------------------------------------------------
// Entry point (last, so that everything above is initialised): a forked worker, or the parent.

if (process.argv[2] === '--worker') {
  await workerProcess();
} else {
  process.exitCode = await main();
}
