// redis-semaphore's Mutex (one Mutex object per acquisition, as its README does), ioredis client.
// Defaults: acquireTimeout 10 s, retryInterval 10 ms, refreshInterval 0.8 × lockTimeout.
import { Mutex } from 'redis-semaphore';
import { closeIoredis, connectIoredis, FAST } from './_clients.mjs';

export const meta = {
  name: 'redis-semaphore',
  client: 'ioredis',
  variants: {
    default: 'defaults: retryInterval 10 ms, acquireTimeout 10 s',
    fast: `retryInterval ${FAST.delay} ms, acquireTimeout ${FAST.waitMs / 1000} s`,
  },
};

export async function create({ url, key, variant, ttl = 10_000 }) {
  const client = await connectIoredis(url);
  const options = { lockTimeout: ttl, ...(variant === 'fast' ? { retryInterval: FAST.delay, acquireTimeout: FAST.waitMs } : {}) };
  return {
    async acquire(k = key) {
      const mutex = new Mutex(client, k, options);
      await mutex.acquire();
      return mutex;
    },
    release: (mutex) => mutex.release(),
    ping: () => client.ping(),
    close: () => closeIoredis(client),
  };
}
