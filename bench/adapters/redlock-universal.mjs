// redlock-universal: createLock (a SimpleLock on one node) with its IoredisAdapter.
// Defaults: retryAttempts 3, retryDelay 100 ms → gives up after ~0.3 s; circuit breaker on,
// health-check PING at most every 30 s. One lock object per key, shared by concurrent callers.
import { createLock, IoredisAdapter } from 'redlock-universal';
import { closeIoredis, connectIoredis, FAST } from './_clients.mjs';

export const meta = {
  name: 'redlock-universal',
  client: 'ioredis',
  variants: {
    default: 'defaults: retryAttempts 3, retryDelay 100 ms (gives up after ~0.3 s)',
    fast: `retryAttempts ${FAST.attempts}, retryDelay ${FAST.delay} ms`,
  },
};

export async function create({ url, key, variant, ttl = 10_000 }) {
  const client = await connectIoredis(url);
  const adapter = new IoredisAdapter(client);
  const retry = variant === 'fast' ? { retryAttempts: FAST.attempts, retryDelay: FAST.delay } : {};
  const locks = new Map();
  const lockFor = (k) => {
    let lock = locks.get(k);
    if (!lock) {
      lock = createLock({ adapter, key: k, ttl, ...retry });
      locks.set(k, lock);
    }
    return lock;
  };
  return {
    async acquire(k = key) {
      const lock = lockFor(k);
      return { lock, handle: await lock.acquire() };
    },
    release: ({ lock, handle }) => lock.release(handle),
    ping: () => client.ping(),
    close: () => closeIoredis(client),
  };
}
