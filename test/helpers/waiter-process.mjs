// A worker process that waits for a lock through the built package (and so queues in Redis),
// printing "waiting" once its first attempt has failed; the test then kills it with SIGKILL.
// Usage: node waiter-process.mjs <redis-url> <prefix> <key> [compat]
// ("compat": a manager in compat mode, createLocks({ compat: 'timestamp' }), on the legacy key prefix + key)
import { Redis } from 'ioredis';
import { createLocks } from '../../dist/index.js';

const [url, prefix, key, mode] = process.argv.slice(2);
const client = new Redis(url);
const locks = createLocks({ redis: client, prefix, ...(mode === 'compat' ? { compat: 'timestamp' } : {}) });
const waiting = locks.acquire(key, { wait: 60_000 });
waiting.catch(() => {});
const queueKey = `${prefix}{${key}}:queue`;
// Report once this process's entry is in the Redis queue.
for (;;) {
  if ((await client.zcard(queueKey)) > 0) break;
  await new Promise((r) => setTimeout(r, 5));
}
process.stdout.write('waiting\n');
setInterval(() => {}, 1 << 30);
