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
//   resourceUrl  the fault-free Redis that holds the protected resources
//   prefix, key  the lock
//   resource  key of the fenced resource (locks.fencedWrite)
//   counter   key of the unfenced counter (read-modify-write: GET, hold, SET read + 1)
//   ttl, wait, hold  ms; rounds (0: until killed); renew (watchdog); commandTimeout (ioredis, ms)
//   idle      ms to rest between rounds (default 0); failIdle: after a failed acquire (default 20)
import { Redis } from 'ioredis';
import { createLocks } from '../../dist/index.js';

const config = JSON.parse(process.argv[2]);
const { id, urls, resourceUrl, prefix, key, resource, counter, ttl, wait, hold } = config;
const rounds = config.rounds ?? 0;
const idle = config.idle ?? 0;

const emit = (ev, data = {}) => {
  process.stdout.write(`${JSON.stringify({ t: String(process.hrtime.bigint()), p: id, ev, ...data })}\n`);
};
/** A lease's validUntil (ms on performance.now()) as an hrtime in ns. */
const toNs = (ms) => String(process.hrtime.bigint() + BigInt(Math.round((ms - performance.now()) * 1e6)));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const describe = (error) => ({ code: error?.code ?? error?.name ?? 'unknown', reason: error?.reason, message: String(error?.message ?? error).slice(0, 200) });

const clientOptions = { lazyConnect: false, ...(config.commandTimeout ? { commandTimeout: config.commandTimeout } : {}) };
const clients = urls.map((url) => new Redis(url, clientOptions));
for (const client of clients) client.on('error', () => {}); // reconnects are the point; errors surface in calls
const locks = createLocks(urls.length === 1 ? { redis: clients[0], prefix } : { redlock: clients, prefix });
const resourceClient = new Redis(resourceUrl);
const resourceLocks = createLocks({ redis: resourceClient, prefix: `${prefix}res:` });

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
  emit('granted', { n, fence, validUntil: toNs(lease.validUntil) });
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
          emit('valid', { n, fence, validUntil: toNs(reported) });
        }
      }, Math.max(5, Math.floor(ttl / 10)))
    : undefined;
  try {
    const read = Number((await resourceClient.get(counter)) ?? 0);
    emit('holding', { n, fence, read });
    await sleep(hold);
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
