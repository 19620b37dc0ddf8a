// A worker process taking several locks at once, through the built package.
// Usage: node multi-worker.mjs <redis-url> <prefix> <mode> [args]
//   mode "loop" <seed> <rounds> <pool>: `rounds` times takes a random set of 1 to 3 of the keys
//                k0…k<pool-1> (tryAcquireAll first on even rounds, then acquireAll), holds them for
//                ~2 ms of awaited work, and prints "<start ns> <end ns> <keys,…> <all|partial>" for each
//                hold (process.hrtime.bigint: one clock for every process of the machine); "all"
//                when, checked in Redis inside the hold, every key asked for is held by this holder.
//                Then "done".
//   mode "hold" <keys,…>: takes every key with a 500 ms TTL, prints "held <fence> …" (in the order of
//                the multi-lease's keys), and holds them until it is killed.
import { Redis } from 'ioredis';
import { createLocks } from '../../dist/index.js';

const [url, prefix, mode, ...rest] = process.argv.slice(2);
const client = new Redis(url);
const raw = new Redis(url);
const locks = createLocks({ redis: client, prefix });
if (mode === 'hold') {
  const all = await locks.acquireAll(rest[0].split(','), { ttl: 500 });
  process.stdout.write(`held ${all.leases.map((p) => p.fence).join(' ')}\n`);
  setInterval(() => {}, 1 << 30);
} else {
  let seed = Number(rest[0]);
  const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  const rounds = Number(rest[1]);
  const pool = Number(rest[2]);
  for (let i = 0; i < rounds; i++) {
    const size = 1 + Math.floor(random() * 3);
    const set = new Set();
    while (set.size < size) set.add(`k${Math.floor(random() * pool)}`);
    const keys = [...set];
    const all = (i % 2 === 0 ? await locks.tryAcquireAll(keys, { ttl: 5000 }) : null) ?? (await locks.acquireAll(keys, { ttl: 5000, wait: 60_000 }));
    const start = process.hrtime.bigint();
    // Every key asked for, each held in Redis by its part's token.
    const asked = [...keys].sort();
    const tokens = await raw.mget(asked.map((key) => `${prefix}{${key}}`));
    const whole = asked.every((key, j) => all.keys[j] === key && tokens[j] === all.leases[j].token) && all.keys.length === asked.length ? 'all' : 'partial';
    await new Promise((r) => setTimeout(r, 2));
    const end = process.hrtime.bigint();
    await all.release();
    process.stdout.write(`${start} ${end} ${asked.join(',')} ${whole}\n`);
  }
  process.stdout.write('done\n');
  await locks.close();
  client.disconnect();
  raw.disconnect();
}
