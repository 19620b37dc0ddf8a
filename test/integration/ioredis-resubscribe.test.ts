/**
 * After a reconnect, an ioredis client subscribes its channels again (`autoResubscribe`) without
 * handling the call's rejection: when the connection ends for good before the reply (the client's
 * retryStrategy gives up, or it is closed), the rejection is unhandled, which ends a Node process
 * by default (seen in CI: redis-sentinel-failover.test.ts, "Connection is closed."). The subscriber
 * latchkey owns is made without it, and latchkey subscribes again itself, catching the call, and
 * has its waiters look again once the subscription is back.
 *
 * The connections go through a fault proxy that resets the one that sends the resubscribe.
 */
import { Redis as Redis6 } from 'ioredis';
import { Redis as Redis5 } from 'ioredis5';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createLocks } from '../../src/index.js';
import { FaultProxy } from '../faults/proxy.js';
import { uniquePrefix, useRedisServer } from '../helpers/fixtures.js';

const redis = useRedisServer();
let proxy: FaultProxy;
beforeAll(async () => {
  proxy = await FaultProxy.start(redis.server.port);
});
afterAll(async () => proxy?.stop());

/** The unhandled rejections seen while a test runs. */
let unhandled: unknown[] = [];
const collect = (reason: unknown): void => void unhandled.push(reason);
beforeEach(() => {
  unhandled = [];
  process.on('unhandledRejection', collect);
});
afterEach(() => {
  process.off('unhandledRejection', collect);
});

interface Client {
  on(event: 'error', listener: () => void): unknown;
  disconnect(): void;
}
const MAJORS = [
  ['ioredis 6', (options: object): Client => new Redis6(proxy.port, '127.0.0.1', options)],
  ['ioredis 5', (options: object): Client => new Redis5(proxy.port, '127.0.0.1', options)],
] as const;

/** A manager on `client` (through the proxy) with a waiter queued, subscribed, behind a holder on the server itself. */
async function waiterBehindHolder(client: Client) {
  client.on('error', () => {});
  const prefix = uniquePrefix();
  const locks = createLocks({ redis: client as never, prefix, recheck: 60_000 });
  const other = createLocks({ redis: redis.raw, prefix });
  const holder = await other.acquire('reconnect', { ttl: 30_000 });
  const waiting = locks.acquire('reconnect', { wait: 20_000 });
  waiting.catch(() => {});
  const subscribed = async (): Promise<number> => ((await redis.raw.pubsub('CHANNELS', `${prefix}inbox:*`)) as string[]).length;
  await expect.poll(subscribed, { timeout: 2000, interval: 10 }).toBe(1);
  const close = async (): Promise<void> => {
    await locks.close();
    await other.close();
    client.disconnect();
  };
  return { locks, holder, waiting, subscribed, close };
}

describe.each(MAJORS)('%s: the inbox subscription after a reconnect', (_, make) => {
  it('a resubscribe cut off by the end of the connection (the retryStrategy gives up) is caught, and the waiter still gets its answer', async () => {
    // One reconnect, then none (its count starts again at each ready).
    let reconnects = 0;
    const client = make({ retryStrategy: () => (++reconnects <= 1 ? 10 : null) });
    const { holder, waiting, close } = await waiterBehindHolder(client);
    const reset = proxy.resetOn('subscribe', { forward: false });
    await redis.raw.call('CLIENT', 'KILL', 'TYPE', 'pubsub');
    expect(await reset).toBe(true);
    await holder.release();
    // Its subscriber is gone for good: the waiter took the lock when the reconnect had it look
    // again, or waits on for its recheck and is turned away by close().
    const outcome = waiting.then(
      async (lease) => (await lease.release(), 'lease'),
      (error: unknown) => (error as { code?: string }).code,
    );
    await close();
    expect(['lease', 'ABORTED']).toContain(await outcome);
    expect(unhandled).toEqual([]);
  });

  it('a resubscribe cut off once is sent again on the next reconnect: the waiter hears the release at once', async () => {
    const client = make({ retryStrategy: () => 10 });
    const { holder, waiting, subscribed, close } = await waiterBehindHolder(client);
    const reset = proxy.resetOn('subscribe', { forward: false });
    await redis.raw.call('CLIENT', 'KILL', 'TYPE', 'pubsub');
    expect(await reset).toBe(true);
    await expect.poll(subscribed, { timeout: 2000, interval: 10 }).toBe(1);
    const released = performance.now();
    await holder.release();
    const lease = await waiting;
    expect(performance.now() - released).toBeLessThan(5000); // its recheck is 60 s
    await lease.release();
    await close();
    expect(unhandled).toEqual([]);
  });
});
