// A worker process on a counting semaphore, through the built package.
// Usage: node permit-worker.mjs <redis-url> <prefix> <name> <limit> <mode> [rounds]
//   mode "loop": takes a permit `rounds` times, holds it for ~2 ms of awaited work, and prints
//                "<start ns> <end ns>" for each hold (process.hrtime.bigint: one clock for every
//                process of the machine), then "done".
//   mode "hold": takes every permit (limit of them) with a 500 ms TTL, prints "held <fence>", and
//                holds them until it is killed.
//   mode "hold-write": takes the write lease of the read-write lock <name> with a 500 ms TTL,
//                prints "held <fence>", and holds it until it is killed.
//   mode "fair-wait": waits for the fair lock <name> (6th argument: the manager's recheck, ms),
//                prints "acquired" and holds it until it is killed.
//   mode "read" / "write": the same loop as "loop" on the read-write lock <name> (limit unused),
//                printing "<read|write> <start ns> <end ns>".
import { Redis } from 'ioredis';
import { createLocks } from '../../dist/index.js';

const [url, prefix, name, limitText, mode, roundsText] = process.argv.slice(2);
const limit = Number(limitText);
const client = new Redis(url);
// fair-wait: the 6th argument is the manager's recheck (ms), which sets how long its queue entry outlives it.
const locks = createLocks({ redis: client, prefix, ...(mode === 'fair-wait' ? { recheck: Number(roundsText) } : {}) });
const sem = ['read', 'write', 'hold-write', 'fair-wait'].includes(mode) ? undefined : locks.semaphore(name, { limit });
if (mode === 'fair-wait') {
  await locks.fairLock(name).acquire({ wait: 60_000 });
  process.stdout.write('acquired\n');
  setInterval(() => {}, 1 << 30);
} else if (mode === 'hold-write') {
  const lease = await locks.readWriteLock(name).write({ ttl: 500 });
  process.stdout.write(`held ${lease.fence}\n`);
  setInterval(() => {}, 1 << 30);
} else if (mode === 'read' || mode === 'write') {
  const rw = locks.readWriteLock(name);
  const scoped = mode === 'read' ? rw.withRead.bind(rw) : rw.withWrite.bind(rw);
  for (let i = 0; i < Number(roundsText); i++) {
    await scoped({ wait: 60_000 }, async () => {
      const start = process.hrtime.bigint();
      await new Promise((r) => setTimeout(r, 2));
      process.stdout.write(`${mode} ${start} ${process.hrtime.bigint()}\n`);
    });
  }
  process.stdout.write('done\n');
  await locks.close();
  client.disconnect();
} else if (mode === 'hold') {
  const lease = await sem.acquire({ permits: limit, ttl: 500 });
  process.stdout.write(`held ${lease.fence}\n`);
  setInterval(() => {}, 1 << 30);
} else {
  for (let i = 0; i < Number(roundsText); i++) {
    await sem.withPermit({ wait: 60_000 }, async () => {
      const start = process.hrtime.bigint();
      await new Promise((r) => setTimeout(r, 2));
      process.stdout.write(`${start} ${process.hrtime.bigint()}\n`);
    });
  }
  process.stdout.write('done\n');
  await locks.close();
  client.disconnect();
}
