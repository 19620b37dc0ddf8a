// Part of examples/demo.mjs (the README's quick-start demo): finding a Redis for the demo to run on,
// starting and stopping its own redis-server when there is none, and deleting the demo's keys.
import { execFileSync, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { describe, REDIS_OPTIONS } from './helpers.mjs';

const DEFAULT_URL = process.env.LATCHKEY_DEMO_DEFAULT_URL || 'redis://127.0.0.1:6379';

/**
 * Returns `{ client, url, label, server? }` for the first Redis that answers (see the header of
 * examples/demo.mjs), or undefined when there is none and the demo should run in memory. Throws
 * when REDIS_URL is set but does not answer.
 */
export async function chooseRedis() {
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
export async function stopServer(server) {
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
export async function deleteKeys(client, prefix) {
  let cursor = '0';
  let deleted = 0;
  do {
    const [next, found] = await client.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 500);
    cursor = next;
    if (found.length > 0) deleted += await client.unlink(...found);
  } while (cursor !== '0');
  console.log(`deleted ${deleted} demo key${deleted === 1 ? '' : 's'} (${prefix}*)`);
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
