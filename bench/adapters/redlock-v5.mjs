// redlock 5.0.0-beta.2 (npm alias redlock-v5): promise API, ioredis clients.
// Defaults: retryCount 10, retryDelay 200 ms, retryJitter 100 ms → gives up after ~2 s.
import Redlock from 'redlock-v5';
import { closeIoredis, connectIoredis, FAST } from './_clients.mjs';

export const meta = {
  name: 'redlock-v5',
  client: 'ioredis',
  variants: {
    default: 'defaults: retryCount 10, retryDelay 200 ms, retryJitter 100 ms (gives up after ~2 s)',
    fast: `retryCount ${FAST.attempts}, retryDelay ${FAST.delay} ms, retryJitter 1 ms`,
  },
};

export async function create({ url, key, variant, ttl = 10_000 }) {
  const client = await connectIoredis(url);
  const settings = variant === 'fast' ? { retryCount: FAST.attempts, retryDelay: FAST.delay, retryJitter: 1 } : {};
  const redlock = new Redlock([client], settings);
  redlock.on('error', () => {});
  return {
    acquire: (k = key) => redlock.acquire([k], ttl),
    release: (lock) => lock.release(),
    ping: () => client.ping(),
    close: () => closeIoredis(client),
  };
}
