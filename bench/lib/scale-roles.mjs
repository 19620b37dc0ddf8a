// The child processes of bench/scale.mjs (forked from it with `--role <name>`): each opens its
// own ioredis client and one library instance, counts the commands it sends (count-commands.mjs),
// and talks to the parent over IPC. Roles:
//   held     acquires N distinct keys with renewal on, holds them for the parent's window, reports
//            its CPU, commands, heap per lease and leases lost, then releases them all;
//   holder   acquires N keys (renewal on) for the waiters, then on `release` releases them one by
//            one, at most `rate` a second, noting when each release was called (shared monotonic
//            clock, lib/clock.mjs);
//   waiters  starts one waiter per key of its share on `go`, reports when each waiter's first
//            attempt was answered, and when each acquire resolved (then releases that lease).
import { Mutex } from 'redis-semaphore';
import { importIoredis } from './clients.mjs';
import { now } from './clock.mjs';
import { countCommands, firstKey } from './count-commands.mjs';
import { latchkeyModule } from './latchkey-module.mjs';

export const TTL = 10_000;
const WAIT = 60_000;
/** Held leases are acquired this many at a time. */
const BATCH = 1000;

/** latchkey or redis-semaphore behind one shape: hold (renewed), wait, release, the lock key Redis sees. */
async function library(name, client, onLost) {
  if (name === 'latchkey') {
    const { createLocks } = await import(latchkeyModule());
    // The `lost` hook counts losses at no cost per lease; SCALE_SIGNAL=1 listens on each lease's
    // signal instead, which makes every lease arm an expiry timer and an AbortController.
    const useSignal = process.env.SCALE_SIGNAL === '1';
    const locks = createLocks({ redis: client, prefix: 'scale:', ...(useSignal ? {} : { hooks: { lost: onLost } }) });
    return {
      async hold(key) {
        const lease = await locks.acquire(key, { ttl: TTL, renew: true, wait: 10_000 }); // free keys: no wait, but room for a slow reply under load
        if (useSignal) lease.signal.addEventListener('abort', () => lease.state === 'lost' && onLost(), { once: true });
        return lease;
      },
      wait: (key) => locks.acquire(key, { ttl: TTL, wait: WAIT }),
      release: (lease) => lease.release(),
      stillHeld: (lease) => lease.state === 'held',
      lockKey: (key) => `scale:{${key}}`,
      close: () => locks.close(),
    };
  }
  if (name === 'redis-semaphore') {
    // Its defaults: refreshInterval 0.8 × lockTimeout (one setInterval and one script call per
    // lock), retryInterval 10 ms while waiting.
    const mutex = (key, acquireTimeout) => new Mutex(client, `scale:${key}`, { lockTimeout: TTL, acquireTimeout, onLockLost: () => onLost() });
    return {
      async hold(key) {
        const m = mutex(key, 10_000);
        await m.acquire();
        return m;
      },
      async wait(key) {
        const m = mutex(key, WAIT);
        await m.acquire();
        return m;
      },
      release: (m) => m.release(),
      stillHeld: (m) => m.isAcquired,
      lockKey: (key) => `mutex:scale:${key}`,
      close: async () => {},
    };
  }
  if (name === 'floor') return floorLibrary(client, onLost);
  throw new Error(`unknown library ${name} (latchkey, redis-semaphore or floor)`);
}

/**
 * The floor: the smallest lock that does what latchkey does here, in the same processes.
 *  - Held leases: SET NX PX with a 40-hex-digit token, renewed every third of the TTL by one
 *    timer for all of them, 500 a call with the smallest checked renewal (an MGET for the call, a
 *    PEXPIRE per lease whose key holds its token), pipelined; nothing else per lease.
 *  - Waiters: the smallest lock that a release hands to a waiter, as the ring of bench/ring.mjs
 *    does. A waiter subscribes to its key's channel on its process's one subscriber connection
 *    and tries once (SET NX, which finds the key held); the holder's release checks its token,
 *    writes the waiter's and publishes it (the ring's pass-on); the waiter has the lock when the
 *    message comes, and releases it (compare and delete). Nothing keeps a place in a queue.
 */
const RENEW_FLOOR = `local held = redis.call('MGET', unpack(KEYS))
local lost = 0
for i = 1, #KEYS do
  if held[i] == ARGV[i + 1] then redis.call('PEXPIRE', KEYS[i], ARGV[1]) else lost = lost + 1 end
end
return lost`;

async function floorLibrary(client, onLost) {
  const { once } = await import('node:events');
  const { randomBytes } = await import('node:crypto');
  const { PASS_ON } = await import('./ring.mjs');
  const { DELETE_IF_EQUAL } = await import('./smallest-lock.mjs');
  client.defineCommand('passOn', { numberOfKeys: 1, lua: PASS_ON });
  client.defineCommand('deleteIfEqual', { numberOfKeys: 1, lua: DELETE_IF_EQUAL });
  client.defineCommand('renewFloor', { lua: RENEW_FLOOR }); // the number of keys is the first argument
  const sub = client.duplicate();
  if (sub.status !== 'ready') await once(sub, 'ready');
  const turns = new Map();
  sub.on('message', (channel) => turns.get(channel)?.());
  const lockKey = (key) => `floor:{${key}}`;
  const waiterToken = (key) => `w:${key}`;
  /** Held keys and their tokens, renewed together every TTL / 3. */
  const held = new Map();
  let timer;
  const renewAll = () => {
    const keys = [...held.keys()];
    for (let i = 0; i < keys.length; i += 500) {
      const chunk = keys.slice(i, i + 500);
      client.renewFloor(chunk.length, ...chunk, TTL, ...chunk.map((k) => held.get(k))).then(
        (lost) => {
          for (let n = 0; n < lost; n++) onLost();
        },
        () => {},
      );
    }
  };
  return {
    async hold(key) {
      const token = randomBytes(20).toString('hex');
      if ((await client.set(lockKey(key), token, 'PX', TTL, 'NX')) !== 'OK') throw new Error(`floor: ${key} is held`);
      held.set(lockKey(key), token);
      timer ??= setInterval(renewAll, TTL / 3);
      return { key, token, holder: true };
    },
    async wait(key) {
      const channel = `floor:${key}`;
      const turn = new Promise((resolve) => turns.set(channel, resolve));
      await sub.subscribe(channel);
      if ((await client.set(lockKey(key), waiterToken(key), 'PX', TTL, 'NX')) !== 'OK') await turn;
      turns.delete(channel);
      void sub.unsubscribe(channel);
      return { key, token: waiterToken(key), holder: false };
    },
    // The holder passes its lock on to the key's waiter; a waiter's release deletes its own.
    release(l) {
      if (!l.holder) return client.deleteIfEqual(lockKey(l.key), l.token);
      held.delete(lockKey(l.key));
      return client.passOn(lockKey(l.key), l.token, waiterToken(l.key), `floor:${l.key}`);
    },
    stillHeld: (l) => !l.holder || held.has(lockKey(l.key)),
    lockKey,
    close: async () => {
      clearInterval(timer);
      sub.disconnect();
    },
  };
}

function messages() {
  const queue = [];
  const waiting = [];
  process.on('message', (m) => {
    const i = waiting.findIndex((w) => w.type === m.type);
    if (i >= 0) waiting.splice(i, 1)[0].resolve(m);
    else queue.push(m);
  });
  return (type) => {
    const i = queue.findIndex((m) => m.type === type);
    if (i >= 0) return Promise.resolve(queue.splice(i, 1)[0]);
    return new Promise((resolve) => waiting.push({ type, resolve }));
  };
}

const send = (msg) => new Promise((resolve) => process.send(msg, resolve));
const gcHeap = () => {
  globalThis.gc?.();
  globalThis.gc?.();
  return process.memoryUsage().heapUsed;
};

async function setUp(lib, port) {
  const commands = await countCommands();
  const { Redis } = await importIoredis();
  const client = new Redis(port, '127.0.0.1');
  await client.ping();
  let lost = 0;
  const instance = await library(lib, client, () => lost++);
  return { client, instance, commands, lost: () => lost };
}

/** Acquires `keys` (renewed), BATCH at a time; every key must be free. */
async function holdAll(instance, keys) {
  const leases = new Array(keys.length);
  for (let i = 0; i < keys.length; i += BATCH) {
    await Promise.all(keys.slice(i, i + BATCH).map(async (key, j) => (leases[i + j] = await instance.hold(key))));
  }
  return leases;
}

async function releaseAll(instance, leases) {
  for (let i = 0; i < leases.length; i += BATCH) {
    await Promise.all(leases.slice(i, i + BATCH).map((l) => instance.release(l).catch(() => {})));
  }
}

const keysOf = (from, count) => Array.from({ length: count }, (_, i) => `k${from + i}`);

async function held({ lib, port, n }) {
  const next = messages();
  const { client, instance, commands, lost } = await setUp(lib, port);
  // Warm-up: the scripts loaded, the code paths compiled, the holder registered, before the baseline.
  await releaseAll(instance, await holdAll(instance, keysOf(n, 10)));
  const baseline = gcHeap();
  await send({ type: 'ready' });
  await next('acquire');
  const t0 = now();
  const leases = await holdAll(instance, keysOf(0, n));
  await send({ type: 'held', acquireMs: now() - t0 });
  await next('start');
  const cpu0 = process.cpuUsage();
  const sent0 = commands.count();
  await next('stop');
  const cpu = process.cpuUsage(cpu0);
  const sent = commands.count() - sent0;
  const heap = gcHeap();
  const notHeld = leases.filter((l) => !instance.stillHeld(l)).length;
  await send({ type: 'measured', cpuMicros: cpu.user + cpu.system, sent, heapPerLease: (heap - baseline) / n, lost: lost(), notHeld });
  const t1 = now();
  await releaseAll(instance, leases);
  const releaseMs = now() - t1;
  await instance.close();
  client.disconnect();
  await send({ type: 'released', releaseMs });
}

async function holder({ lib, port, n, rate }) {
  const next = messages();
  const { client, instance, commands } = await setUp(lib, port);
  const leases = await holdAll(instance, keysOf(0, n));
  await send({ type: 'held' });
  for (;;) {
    const m = await next('count-or-release');
    if (m.what === 'count') {
      await send({ type: 'count', sent: commands.count(), cpu: process.cpuUsage() });
      continue;
    }
    break;
  }
  // One by one, each release awaited before the next is called, at most `rate` a second (every
  // library at the same pace: as fast as the holder can, a library whose release is quicker
  // would flood the waiters' processes, and its latencies would measure their queue).
  const calledAt = new Array(n);
  const gap = rate > 0 ? 1000 / rate : 0;
  const start = now();
  for (let i = 0; i < n; i++) {
    const due = start + i * gap;
    if (now() < due) await new Promise((resolve) => setTimeout(resolve, Math.max(1, due - now())));
    calledAt[i] = now();
    await instance.release(leases[i]);
  }
  await send({ type: 'releases', calledAt });
  await instance.close();
  client.disconnect();
  await send({ type: 'closed' });
}

async function waiters({ lib, port, from, count }) {
  const next = messages();
  const { client, instance, commands } = await setUp(lib, port);
  const keys = keysOf(from, count);
  const byLockKey = new Map(keys.map((k, i) => [instance.lockKey(k), i]));
  const firstAnswer = new Array(count);
  let answered = 0;
  let reportAnswered;
  const allAnswered = new Promise((resolve) => (reportAnswered = resolve));
  commands.onFirstReply(
    (command) => (byLockKey.has(firstKey(command)) ? firstKey(command) : undefined),
    (lockKey) => {
      firstAnswer[byLockKey.get(lockKey)] = now();
      if (++answered === count) reportAnswered();
    },
  );
  const baseline = gcHeap();
  await send({ type: 'ready' });
  await next('go');
  const started = now();
  const resolvedAt = new Array(count);
  const failures = [];
  const done = Promise.all(
    keys.map(async (key, i) => {
      try {
        const lease = await instance.wait(key);
        resolvedAt[i] = now();
        await instance.release(lease);
      } catch (error) {
        failures.push(String(error?.message ?? error));
      }
    }),
  );
  await allAnswered;
  await send({ type: 'answered', started, lastFirstAnswer: Math.max(...firstAnswer) });
  for (;;) {
    const m = await next('count-or-finish');
    if (m.what === 'count') {
      const heap = m.heap ? (gcHeap() - baseline) / count : undefined;
      await send({ type: 'count', sent: commands.count(), cpu: process.cpuUsage(), heapPerWaiter: heap });
      continue;
    }
    break;
  }
  await done;
  await send({ type: 'resolved', resolvedAt, failures: failures.slice(0, 3), failed: failures.length });
  await instance.close();
  client.disconnect();
  await send({ type: 'closed' });
}

/** Runs the role named on the command line (`--role <name>`), with its setup from the parent's first message. */
export async function runRole(role) {
  const setup = await new Promise((resolve) => process.once('message', resolve));
  const roles = { held, holder, waiters };
  try {
    await roles[role](setup);
  } catch (error) {
    await send({ type: 'fatal', message: String(error?.stack ?? error) });
  }
  process.disconnect();
}
