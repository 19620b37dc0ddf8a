// A fault-suite worker: a separate process that uses the built package (dist/) to take a lock
// through the harness's fault proxies, write to the protected resources with its fence, hold
// briefly and release, in a loop. Every event goes to stdout as one JSON line stamped with
// process.hrtime.bigint() (CLOCK_MONOTONIC: one clock for every process of the machine), so the
// harness can merge the histories of all workers. stdout is a pipe, written synchronously on
// Linux, so a line is out before the next statement runs, even if the process is then killed.
//
// Usage: node worker.mjs '<json config>'
//   id        name in the history
//   urls      one Redis URL (single mode) or several (Redlock); the harness's proxies
//   cluster   true: `urls` are the startup nodes of a Redis Cluster, reached directly (no proxy)
//             through one ioredis Cluster client (the soak's cluster mode, see cluster-rig.ts)
//   resourceUrl  the fault-free Redis that holds the protected resources
//   prefix, key  the lock
//   resource  key of the fenced resource (locks.fencedWrite)
//   counter   key of the unfenced counter (read-modify-write: GET, hold, SET read + 1)
//   ttl, wait, hold  ms; rounds (0: until killed); renew (watchdog); commandTimeout (ioredis, ms)
//   holdUntil key of a list on the resource Redis: each hold ends when an element is pushed there
//             (BLPOP, the harness's endHold), or after `hold` ms if none is
//   idle      ms to rest between rounds (default 0); failIdle: after a failed acquire (default 20)
//   replication  the createLocks option (replica acknowledgement), as given
//   recheck   the createLocks option (a waiter's periodic re-check, ms)
//   clockRate the rate of this process's monotonic clock as latchkey sees it (performance.now):
//             0.9 runs 10% slow, like a holder whose clock drifts. Default 1. The history stays on
//             the true clock: a validity end is reported as the true time at which this process's
//             clock reaches it (when the holder believes its lease ends).
// SIGUSR2 makes the wall clock (Date.now) jump: to +1 h, then to -1 h, then to +1 h, … (a clock
// step by NTP or an operator); the event 'clock-jump' records it.
// Warnings of the manager's logger are recorded as 'log' events (the eviction-policy warning, …).
import { Cluster, Redis } from 'ioredis';
import { createLocks } from '../../dist/index.js';

const config = JSON.parse(process.argv[2]);
const clockRate = config.clockRate ?? 1;
const realNow = performance.now.bind(performance);
if (clockRate !== 1) {
  const origin = realNow();
  performance.now = () => origin + (realNow() - origin) * clockRate;
}
const realDateNow = Date.now;
let dateOffset = 0;
Date.now = () => realDateNow() + dateOffset;
const { id, urls, resourceUrl, prefix, key, resource, counter, ttl, wait, hold } = config;
const rounds = config.rounds ?? 0;
const idle = config.idle ?? 0;

const emit = (ev, data = {}) => {
  process.stdout.write(`${JSON.stringify({ t: String(process.hrtime.bigint()), p: id, ev, ...data })}\n`);
};
/** A lease's validUntil (ms on performance.now(), maybe drifting) as the true hrtime in ns at which that clock reaches it. */
const toNs = (ms) => String(process.hrtime.bigint() + BigInt(Math.round(((ms - performance.now()) / clockRate) * 1e6)));
/** The drift allowance latchkey takes off a lease (src/clock.ts driftFor, default driftFactor 0.01). */
const drift = (ttl) => Math.ceil(ttl * 0.01) + 2;
process.on('SIGUSR2', () => {
  dateOffset = dateOffset > 0 ? -3_600_000 : 3_600_000;
  emit('clock-jump', { offset: dateOffset });
});
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const describe = (error) => ({ code: error?.code ?? error?.name ?? 'unknown', reason: error?.reason, message: String(error?.message ?? error).slice(0, 200) });

const clientOptions = { lazyConnect: false, ...(config.commandTimeout ? { commandTimeout: config.commandTimeout } : {}) };
const clients = config.cluster
  ? [new Cluster(urls.map((url) => ({ host: new URL(url).hostname, port: Number(new URL(url).port) })), { redisOptions: clientOptions })]
  : urls.map((url) => new Redis(url, clientOptions));
for (const client of clients) client.on('error', () => {}); // reconnects are the point; errors surface in calls
const log = (level) => (obj, msg) => emit('log', { level, latchkey: obj?.latchkey, policy: obj?.policy, msg: String(msg ?? '').slice(0, 200) });
const logger = { debug: () => {}, info: () => {}, warn: log('warn'), error: log('error') };
const locks = createLocks({
  ...(clients.length === 1 ? { redis: clients[0] } : { redlock: clients }),
  prefix,
  logger,
  ...(config.replication ? { replication: config.replication } : {}),
  ...(config.recheck ? { recheck: config.recheck } : {}),
});
const resourceClient = new Redis(resourceUrl);
const resourceLocks = createLocks({ redis: resourceClient, prefix: `${prefix}res:` });
// Its own connection: BLPOP blocks the connection it runs on.
const holdClient = config.holdUntil ? resourceClient.duplicate() : undefined;

emit('started', { pid: process.pid });
for (let n = 0; rounds === 0 || n < rounds; n++) {
  emit('requested', { n, wait });
  let lease;
  try {
    lease = await locks.acquire(key, { ttl, wait, renew: config.renew ?? false });
  } catch (error) {
    emit('failed', { n, ...describe(error) });
    await sleep(config.failIdle ?? 20);
    continue;
  }
  const fence = lease.fence;
  emit('granted', { n, fence, validUntil: toNs(lease.validUntil), ...(lease.replicated === undefined ? {} : { replicated: lease.replicated }) });
  lease.signal.addEventListener('abort', () => {
    const reason = lease.signal.reason;
    if (reason?.code === 'LEASE_LOST') emit('lost', { n, fence, reason: reason.reason });
  });
  // With the watchdog, the validity moves on: report each new end while the lease is held.
  let reported = lease.validUntil;
  const watch = config.renew
    ? setInterval(() => {
        if (lease.state === 'held' && lease.validUntil !== reported) {
          reported = lease.validUntil;
          // A renewal's validity counts from its send: validUntil = sent + ttl - drift.
          emit('valid', { n, fence, validUntil: toNs(reported), sent: toNs(reported - ttl + drift(ttl)) });
        }
      }, Math.max(5, Math.floor(ttl / 10)))
    : undefined;
  try {
    const read = Number((await resourceClient.get(counter)) ?? 0);
    emit('holding', { n, fence, read });
    if (holdClient) await holdClient.blpop(config.holdUntil, hold / 1000);
    else await sleep(hold);
    // No check of lease.held here on purpose: a holder can always pause between such a check
    // and its write, so the resource must refuse the stale write on its own.
    emit('write-attempted', { n, fence });
    try {
      await resourceLocks.fencedWrite(resource, `${id}:${fence}`, fence);
      emit('write-accepted', { n, fence });
    } catch (error) {
      emit('write-refused', { n, fence, ...describe(error) });
    }
    await resourceClient.set(counter, String(read + 1));
    emit('counter-written', { n, fence, read });
  } finally {
    if (watch) clearInterval(watch);
  }
  emit('release-sent', { n, fence });
  try {
    await lease.release();
    emit('released', { n, fence });
  } catch (error) {
    emit('release-failed', { n, fence, ...describe(error) });
  }
  if (idle > 0) await sleep(idle);
}
emit('done');
await locks.close();
await resourceLocks.close();
for (const client of clients) client.disconnect();
resourceClient.disconnect();
holdClient?.disconnect();
