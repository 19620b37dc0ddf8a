// Two sides taking turns on one key in one process (bench/grant-path.mjs, bench/grant-calls.mjs):
// A holds, B queues (its attempt answered busy), A releases, B's grant arrives; then the other way
// round. `scripts`: latchkey's acquire.lua and release.lua through ioredis with nothing around
// them (lib/ring.mjs, joinScripts); `latchkey`: two managers of the build lib/latchkey-module.mjs names.
import { latchkeyModule } from './latchkey-module.mjs';
import { joinScripts } from './ring.mjs';

/** B's attempt reaches Redis and is answered (busy) before A releases: a timer turn and an I/O turn. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 0)).then(() => new Promise((resolve) => setImmediate(resolve)));

/** The two sides of `kind` on the Redis at `port`, each with acquire() and release(held), and how to close them. */
export async function openPair(Redis, kind, port, prefix) {
  const clients = [new Redis(port, '127.0.0.1'), new Redis(port, '127.0.0.1')];
  const disconnect = () => clients.forEach((c) => c.disconnect());
  if (kind === 'scripts') {
    await clients[0].del('scripts', 'scripts:queue', 'scripts:alive');
    const sides = await Promise.all(clients.map((c, i) => joinScripts(c, i)));
    return {
      pair: sides.map((s) => ({ acquire: () => s.acquire(), release: () => s.release() })),
      close: async () => {
        for (const s of sides) s.leave();
        disconnect();
      },
    };
  }
  const { createLocks } = await import(latchkeyModule());
  const managers = clients.map((redis) => createLocks({ redis, prefix }));
  return {
    pair: managers.map((m) => ({ acquire: () => m.acquire('k', { ttl: 10_000 }), release: (lease) => lease.release() })),
    close: async () => {
      await Promise.all(managers.map((m) => m.close()));
      disconnect();
    },
  };
}

/**
 * `count` hand-offs between the two sides of `pair`. For hand-off k: `before(k)` runs before the
 * waiting side's acquire(), `resolved(k)` the moment that acquire() resolves (not when this loop
 * goes on: that waits for the release's reply too), `after(k)` once the loop holds its lease.
 */
export async function takeTurns(pair, count, { before = () => {}, resolved = () => {}, after = () => {} } = {}) {
  let held = await pair[0].acquire();
  for (let k = 0; k < count; k++) {
    const [from, to] = k % 2 === 0 ? pair : [pair[1], pair[0]];
    before(k);
    const next = to.acquire().then((lease) => {
      resolved(k);
      return lease;
    });
    await settle();
    await from.release(held);
    held = await next;
    after(k);
  }
  await pair[count % 2].release(held);
}
