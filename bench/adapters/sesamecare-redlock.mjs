// @sesamecare-oss/redlock: TypeScript rewrite of redlock v5 for ioredis 5.
// Defaults: retryCount 10, retryDelay 200 ms, retryJitter 100 ms → gives up after ~2 s
// (its README says jitter 200; the code's default is 100).
import { Redlock } from '@sesamecare-oss/redlock';
import { closeIoredis, connectIoredis, FAST } from './_clients.mjs';

export const meta = {
  name: '@sesamecare-oss/redlock',
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
  return {
    acquire: (k = key) => redlock.acquire([k], ttl),
    release: (lock) => lock.release(),
    ping: () => client.ping(),
    close: () => closeIoredis(client),
  };
}
