// A worker process on a "machine" whose wall clock runs ahead: Date.now and
// performance.timeOrigin (the two wall clocks a Node program reads) are moved forward by the
// given offset before the built package is loaded; the machine's clock is not touched, and Redis
// is not mocked. It takes one Redlock lease, prints "acquired <fence>", releases it and exits.
// Usage: node clock-ahead-process.mjs <offset-ms> <prefix> <key> <redis-url>...
const [offset, prefix, key, ...urls] = process.argv.slice(2);
const ahead = Number(offset);
const realDateNow = Date.now;
Date.now = () => realDateNow() + ahead;
Object.defineProperty(performance, 'timeOrigin', { value: performance.timeOrigin + ahead });

const { Redis } = await import('ioredis');
const { createLocks } = await import('../../dist/index.js');
const clients = urls.map((url) => new Redis(url));
const locks = createLocks({ redlock: clients, prefix });
const lease = await locks.acquire(key, { ttl: 5000, wait: 5000 });
process.stdout.write(`acquired ${lease.fence}\n`);
await lease.release();
await locks.close();
for (const client of clients) client.disconnect();
