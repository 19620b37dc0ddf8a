/**
 * examples/express-orders.mjs: two replicas of the server, one private redis-server. An order is
 * charged once however the requests are spread; a busy order answers 409 with Retry-After.
 */
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocks, type Locks } from '../../src/index.js';
import { rawClient } from '../helpers/harness.js';
import { RedisServer } from '../helpers/redis-server.js';
import { startExample, type RunningExample } from './run-example.js';

let server: RedisServer;
let raw: Redis;
let locks: Locks;
const replicas: RunningExample[] = [];
const urls: string[] = [];

beforeAll(async () => {
  server = await RedisServer.start();
  raw = rawClient(server);
  locks = createLocks({ redis: raw });
  for (let i = 0; i < 2; i++) {
    const replica = startExample('express-orders.mjs', [], {
      REDIS_URL: server.url,
      PORT: '0',
      PAYMENT_DELAY_MS: '300',
      LOCK_WAIT_MS: '100',
    });
    replicas.push(replica);
  }
  for (const replica of replicas) urls.push((await replica.line(/listening on (http:\S+)/))[1]!);
});

afterAll(async () => {
  await Promise.all(replicas.map((r) => r.stop()));
  for (const r of replicas) expect(r.stderr()).toBe('');
  await locks?.close();
  raw?.disconnect();
  await server?.stop();
});

const pay = async (base: string, id: number): Promise<{ status: number; body: Record<string, unknown>; retryAfter: string | null }> => {
  const res = await fetch(`${base}/orders/${id}/pay`, { method: 'POST' });
  return { status: res.status, body: (await res.json()) as Record<string, unknown>, retryAfter: res.headers.get('retry-after') };
};

const charges = async (id: number): Promise<unknown[]> =>
  (await raw.lrange('shop:charges', 0, -1)).map((c) => JSON.parse(c) as { id: string }).filter((c) => c.id === String(id));

describe('examples/express-orders.mjs', () => {
  it('answers 409 with Retry-After while someone else holds the order, then charges it once', async () => {
    const held = await locks.acquire('orders:1');
    const busy = await pay(urls[0]!, 1);
    expect(busy.status).toBe(409);
    expect(busy.retryAfter).toBe('1');
    expect(busy.body.error).toMatch(/being paid/);
    await held.release();

    const paid = await pay(urls[1]!, 1);
    expect(paid.status).toBe(200);
    expect(paid.body).toMatchObject({ id: '1', status: 'paid' });
    expect(paid.body.fence).toBeGreaterThan(held.fence);

    const again = await pay(urls[0]!, 1);
    expect(again.status).toBe(409);
    expect(again.body.error).toMatch(/already paid/);
    expect(await charges(1)).toHaveLength(1);
  });

  it('charges an order once when both replicas get the same request at the same time', async () => {
    const results = await Promise.all([pay(urls[0]!, 2), pay(urls[1]!, 2), pay(urls[0]!, 2), pay(urls[1]!, 2)]);
    const codes = results.map((r) => r.status).sort();
    expect(codes).toEqual([200, 409, 409, 409]);
    expect(await charges(2)).toHaveLength(1);
    expect(await raw.hget('shop:order:2', 'status')).toBe('paid');
  });

  it('answers 404 for an order that does not exist, and leaves no lock behind', async () => {
    const missing = await pay(urls[0]!, 99);
    expect(missing.status).toBe(404);
    expect((await locks.inspect('orders:99')).held).toBe(false);
  });
});
