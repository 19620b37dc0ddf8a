// latchkey, from this repository's build (run `npm run build` first), or the build LATCHKEY_DIST names.
// Variants: "default" (notify strategy, all defaults) and "backoff" (strategy: 'backoff').
// LATCHKEY_RECHECK=<ms>: the managers' `recheck` (a diagnostic: how often the queue keeper calls).
import { latchkeyModule } from '../lib/latchkey-module.mjs';
import { closeIoredis, connectIoredis } from './_clients.mjs';

const { createLocks } = await import(latchkeyModule());

export const meta = {
  name: 'latchkey',
  client: 'ioredis',
  variants: {
    default: 'defaults: strategy notify (pub/sub wake-up, 1 s re-check), wait 10 s',
    backoff: "strategy: 'backoff' (exponential 5 ms → 250 ms, full jitter), wait 10 s",
  },
};

export async function create({ url, key, variant, ttl = 10_000 }) {
  const client = await connectIoredis(url);
  const locks = createLocks({
    redis: client,
    prefix: 'bench:latchkey:',
    ...(variant === 'backoff' ? { strategy: 'backoff' } : {}),
    ...(process.env.LATCHKEY_RECHECK ? { recheck: Number(process.env.LATCHKEY_RECHECK) } : {}),
  });
  return {
    acquire: (k = key) => locks.acquire(k, { ttl }),
    release: (lease) => lease.release(),
    ping: () => client.ping(),
    async close() {
      await locks.close();
      await closeIoredis(client);
    },
  };
}
