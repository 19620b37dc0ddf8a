// redlock 4.x (npm alias redlock-v4): callback/bluebird API, one ioredis client.
// Defaults: retryCount 10, retryDelay 200 ms, retryJitter 100 ms → gives up after ~2 s.
// Note: v4 runs the unlock script after every failed attempt, so a failed try costs 2 commands.
import { createRequire } from 'node:module';
import { closeIoredis, connectIoredis, FAST } from './_clients.mjs';

const require = createRequire(import.meta.url);
const Redlock = require('redlock-v4');

export const meta = {
  name: 'redlock-v4',
  client: 'ioredis',
  variants: {
    default: 'defaults: retryCount 10, retryDelay 200 ms, retryJitter 100 ms (gives up after ~2 s)',
    fast: `retryCount ${FAST.attempts}, retryDelay ${FAST.delay} ms, retryJitter 1 ms`,
  },
};

export async function create({ url, key, variant, ttl = 10_000 }) {
  const client = await connectIoredis(url);
  const options = variant === 'fast' ? { retryCount: FAST.attempts, retryDelay: FAST.delay, retryJitter: 1 } : {};
  const redlock = new Redlock([client], options);
  redlock.on('clientError', () => {});
  return {
    acquire: (k = key) => redlock.lock(k, ttl),
    release: (lock) => lock.unlock(),
    ping: () => client.ping(),
    close: () => closeIoredis(client),
  };
}
