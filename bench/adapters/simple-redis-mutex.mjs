// simple-redis-mutex 3.x: requires node-redis; pub/sub on one global channel for every lock,
// plus polling every `pollingInterval` (default 10 s). By default `lock()` waits forever; the
// harness needs a bounded wait, so both variants pass failAfter 10 s.
import { lock } from 'simple-redis-mutex';
import { closeNodeRedis, connectNodeRedis, FAST } from './_clients.mjs';

export const meta = {
  name: 'simple-redis-mutex',
  client: 'node-redis',
  variants: {
    default: 'defaults: pub/sub + pollingInterval 10 s (failAfter 10 s added: the default waits forever)',
    fast: `pub/sub + pollingInterval ${FAST.delay} ms, failAfter ${FAST.waitMs / 1000} s`,
  },
};

export async function create({ url, key, variant, ttl = 10_000 }) {
  const client = await connectNodeRedis(url);
  const options = { timeout: ttl, failAfter: FAST.waitMs, ...(variant === 'fast' ? { pollingInterval: FAST.delay } : {}) };
  return {
    acquire: (k = key) => lock(client, k, options),
    release: (release) => release(),
    ping: () => client.ping(),
    close: () => closeNodeRedis(client),
  };
}
