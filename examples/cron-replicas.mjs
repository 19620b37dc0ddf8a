// latchkey example: a cron job across replicas.
//
// Every replica of a service schedules the same job (say, once a minute). All of them fire at
// the same tick; exactly one should run the job. Each replica calls tryAcquire on a lock named
// after the job and the tick, with a TTL that covers the run:
//   - the one that gets it runs the job; the others get null at once and skip that tick;
//   - the winner does NOT release the lease when the job is done: it calls lease.letExpire(), so
//     that nothing (not the end of the job, not locks.close() at shutdown) releases it. A replica
//     whose timer fires late (a busy event loop, a clock a second behind) still finds the tick
//     taken. The lease ends by its TTL, which is shorter than the interval;
//   - the job gets lease.signal: if the run outlasts the TTL, the lease expires, the signal aborts
//     and the job must stop, because another replica may start the next tick;
//   - the lease's fence orders the runs: pass it to what the job writes (see
//     postgres-fenced-worker.mjs) so that a late write from an overrun is refused.
// The lock name carries the tick's scheduled time (`cron:<job>:<tick>`), so that a run that is
// late or slow can never be mistaken for the next tick's. Each name leaves a small fence counter
// behind for a day (docs/safety.md, "How a fence is issued"): about 1,440 keys for a job that runs
// every minute. `latchkey list 'cron:*'` shows the tick being run and by whom.
//
// With the latchkey command instead, from crontab on every machine:
//   * * * * *  npx latchkey exec --no-wait --conflict-exit-code 0 --ttl 50s cron:report -- ./report.sh
// `exec` releases the lock when the script exits, so a replica whose cron fires after a fast
// script has finished runs it again: there, keep the script longer than the skew between
// machines, or name the lock after the tick (cron:report:$(date +%Y%m%d%H%M)).
//
// Run (build first: npm run build; a Redis on REDIS_URL, default redis://127.0.0.1:6379), several
// at once to play the replicas:
//   for i in 1 2 3; do node examples/cron-replicas.mjs --every 2000 --ticks 3 & done; wait
// Options: --every <ms> (the interval; default 60000, ticks fall on multiples of it since the
// epoch, like cron), --ttl <ms> (default 80% of --every), --ticks <n> (stop after n ticks; default:
// run until SIGINT/SIGTERM), --job-ms <ms> (how long the pretend job takes, default 100).
// Output: one JSON line per tick: {"tick":…,"ran":true,"fence":…} or {"tick":…,"ran":false}.
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
// In an application: import { createLocks } from 'latchkey';
import { createLocks } from '../dist/index.js';

const { values } = parseArgs({
  options: {
    every: { type: 'string', default: '60000' },
    ttl: { type: 'string' },
    ticks: { type: 'string' },
    'job-ms': { type: 'string', default: '100' },
    job: { type: 'string', default: 'report' },
  },
});
const every = Number(values.every);
const ttl = Number(values.ttl ?? Math.floor(every * 0.8));
const ticks = values.ticks === undefined ? Infinity : Number(values.ticks);
const jobMs = Number(values['job-ms']);

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const locks = createLocks({ redis, holder: true });
const stopping = new AbortController();
process.once('SIGINT', () => stopping.abort());
process.once('SIGTERM', () => stopping.abort());

/** The job itself. It gets the lease's signal and fence; a real job passes both on. */
async function runReport({ tick, fence, signal }) {
  await sleep(jobMs, undefined, { signal });
  await redis.rpush(`cron-example:${values.job}:runs`, JSON.stringify({ tick, fence, pid: process.pid }));
}

async function onTick(tick) {
  // tryAcquire: one attempt, no waiting. No watchdog (renew is off for tryAcquire by default):
  // the TTL is the whole budget of the run.
  const lease = await locks.tryAcquire(`cron:${values.job}:${tick}`, { ttl });
  if (lease === null) {
    console.log(JSON.stringify({ tick, ran: false }));
    return;
  }
  lease.letExpire(); // the tick stays taken until the TTL, whatever happens next
  try {
    await runReport({ tick, fence: lease.fence, signal: lease.signal });
    console.log(JSON.stringify({ tick, ran: true, fence: lease.fence }));
  } catch (error) {
    // When lease.signal aborted (the run overran its TTL and was stopped), its reason is a
    // LeaseLostError; the job's own error is an AbortError from the sleep it was in.
    const reason = lease.signal.aborted ? lease.signal.reason : error;
    console.log(JSON.stringify({ tick, ran: true, fence: lease.fence, error: String(reason) }));
  }
}

try {
  for (let n = 0; n < ticks && !stopping.signal.aborted; n++) {
    // Sleep until the next multiple of `every` on the wall clock, as cron does. This is the only
    // wall-clock use: latchkey itself never trusts Date.now().
    const tick = (Math.floor(Date.now() / every) + 1) * every;
    try {
      await sleep(tick - Date.now(), undefined, { signal: stopping.signal });
    } catch {
      break; // SIGINT or SIGTERM
    }
    await onTick(tick);
  }
} finally {
  // The last tick's lease was left to expire: close() does not release it, so a late replica
  // cannot run that tick again.
  await locks.close();
  redis.disconnect();
}
