// latchkey example: an Express route that guards an order.
//
// POST /orders/:id/pay charges an order once, however many times it is clicked and however many
// replicas of this server run behind the load balancer. The route takes the lock `orders:<id>`
// with withLock and a short wait: a second request for the same order, on any replica, either
// waits a moment for the first to finish (and then sees the order paid) or gets 409 with
// Retry-After. Inside the lock the lease's signal goes to the payment call, so a lease lost while
// paying (Redis unreachable, a forced release) stops the call instead of letting it finish
// unprotected, and the lease's fence goes to the provider as part of the idempotency key.
//
// Run (build first: npm run build; a Redis on REDIS_URL, default redis://127.0.0.1:6379):
//   node examples/express-orders.mjs                     # PORT=3000 by default; PORT=0 picks a free one
//   curl -X POST localhost:3000/orders/1/pay & curl -X POST localhost:3000/orders/1/pay
//     -> one 200 {"status":"paid"...}, one 409; run it twice on two ports to see it across replicas.
// Environment: REDIS_URL, PORT, PAYMENT_DELAY_MS (how long the fake provider takes, default 500),
// LOCK_WAIT_MS (how long a request waits for a busy order before 409, default 200).
// Orders 1 to 5 are created (open, 1000 cents) at start if missing. Keys: shop:order:<id> (a hash),
// shop:charges (a list the fake provider appends to), and latchkey's own keys.
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import express from 'express';
import { Redis } from 'ioredis';
// In an application: import { createLocks, LeaseLostError, LockTimeoutError } from 'latchkey';
import { createLocks, LeaseLostError, LockTimeoutError } from '../dist/index.js';

/**
 * The app, with its collaborators passed in so that several replicas can share one Redis.
 * @param {{ locks: import('../dist/index.js').Locks, redis: Redis, payments: { charge(id: string, amount: number, options: { signal: AbortSignal, idempotencyKey: string }): Promise<string> }, lockWait?: number }} deps
 */
export function createApp({ locks, redis, payments, lockWait = 200 }) {
  const app = express();

  app.post('/orders/:id/pay', async (req, res) => {
    const id = req.params.id;
    const orderKey = `shop:order:${id}`;
    try {
      // One lock per order: two requests for different orders never wait for each other.
      // `wait`: how long to queue behind a request already paying this order. Keep it short in an
      // HTTP handler; LockTimeoutError after it becomes a 409 below. withLock renews the lease
      // while the callback runs (the watchdog), so `ttl` only has to cover a stall, not the work.
      const result = await locks.withLock(`orders:${id}`, { ttl: 10_000, wait: lockWait }, async (lease) => {
        // Read the state under the lock: a request that waited sees what the previous holder did.
        const order = await redis.hgetall(orderKey);
        if (order.status === undefined) return { code: 404, body: { error: `no order ${id}` } };
        if (order.status === 'paid') return { code: 409, body: { error: `order ${id} is already paid`, charge: order.charge } };

        // The lease's signal aborts if the lease is lost: the provider call stops. The fence is
        // unique per lease and grows, so `<order>:<fence>` is a safe idempotency key for a retry.
        const charge = await payments.charge(id, Number(order.amount), {
          signal: lease.signal,
          idempotencyKey: `${id}:${lease.fence}`,
        });
        await redis.hset(orderKey, { status: 'paid', charge });
        return { code: 200, body: { id, status: 'paid', charge, fence: lease.fence } };
      });
      res.status(result.code).json(result.body);
    } catch (error) {
      if (error instanceof LockTimeoutError) {
        // Busy: another request (maybe on another replica) is paying this order right now.
        res.status(409).set('Retry-After', '1').json({ error: `order ${id} is being paid by another request` });
      } else if (error instanceof LeaseLostError) {
        // The lease ended while we worked (error.reason says how): the charge may or may not have
        // gone through. Say so instead of claiming success; the idempotency key makes a retry safe.
        res.status(503).json({ error: `lost the lock on order ${id} (${error.reason}); retry` });
      } else {
        throw error; // Express 5 passes a rejected handler's error to its error handler (500).
      }
    }
  });

  return app;
}

/** A stand-in for a payment provider: takes `delay` ms, honours the signal, records each charge. */
export function fakePayments(redis, delay) {
  return {
    async charge(id, amount, { signal, idempotencyKey }) {
      await sleep(delay, undefined, { signal }); // rejects (AbortError) when the lease is lost
      await redis.rpush('shop:charges', JSON.stringify({ id, amount, idempotencyKey }));
      return `ch_${idempotencyKey}`;
    },
  };
}

async function main() {
  const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
  // holder: true records "<hostname> pid <pid>" with each lease, for `latchkey list` and `status`.
  const locks = createLocks({ redis, holder: true });
  for (let id = 1; id <= 5; id++) {
    await redis.hsetnx(`shop:order:${id}`, 'status', 'open');
    await redis.hsetnx(`shop:order:${id}`, 'amount', '1000');
  }
  const app = createApp({
    locks,
    redis,
    payments: fakePayments(redis, Number(process.env.PAYMENT_DELAY_MS ?? 500)),
    lockWait: Number(process.env.LOCK_WAIT_MS ?? 200),
  });
  const server = app.listen(Number(process.env.PORT ?? 3000), '127.0.0.1', () => {
    console.log(`listening on http://127.0.0.1:${server.address().port}`);
  });

  // On SIGTERM/SIGINT: stop taking requests, let the ones in flight finish, then close the locks
  // (which releases any lease still held) and the Redis client latchkey borrowed.
  const stop = () => {
    server.close(async () => {
      await locks.close();
      redis.disconnect();
    });
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main().catch((error) => {
    console.error(error);
    process.exitCode = 1;
  });
}
