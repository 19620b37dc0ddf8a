// A worker process that takes a lock through the built package and then holds it until it is
// killed: used to show that a crashed holder's lock comes back by its TTL.
// Usage: node holder-process.mjs <redis-url> <prefix> <key> <ttl-ms>
import { Redis } from 'ioredis';
import { createLocks } from '../../dist/index.js';

const [url, prefix, key, ttl] = process.argv.slice(2);
const client = new Redis(url);
const locks = createLocks({ redis: client, prefix });
const lease = await locks.acquire(key, { ttl: Number(ttl) });
process.stdout.write(`acquired ${lease.fence}\n`);
setInterval(() => {}, 1 << 30);
