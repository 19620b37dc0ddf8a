/**
 * Valkey GLIDE beyond the contract suite (test/contract/valkey-glide.test.ts): the subscriber
 * connection latchkey creates for it and closes, clients configured unlike the default (bytes
 * decoder, RESP2, their own pub/sub callback) and the script cache fallback. On a real
 * redis-server. GlideClusterClient runs the contract suite in test/contract/cluster.test.ts.
 */
import { Decoder, GlideClient, GlideClientConfiguration, Logger as GlideLogger, ProtocolVersion } from '@valkey/valkey-glide';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { adaptClient } from '../../src/client/detect.js';
import { createLocks, type Locks } from '../../src/index.js';
import { uniquePrefix, useRedisServer } from '../helpers/harness.js';

const redis = useRedisServer();

/** Connections in subscriber mode on the test server (CLIENT LIST flag `P`). */
async function subscribers(): Promise<number> {
  const list = (await redis.raw.client('LIST')) as string;
  return list.split('\n').filter((line) => /\bflags=\S*P/.test(line)).length;
}

async function glide(extra: Partial<GlideClientConfiguration> = {}): Promise<GlideClient> {
  const client = await GlideClient.createClient({ addresses: [{ host: '127.0.0.1', port: redis.server.port }], requestTimeout: 2000, ...extra });
  redis.cleanup.push(async () => {
    await client.unsubscribe(null, 1000).catch(() => {}); // else GLIDE keeps restoring a closed client's subscriptions, logging errors
    client.close();
  });
  return client;
}

/** A waiter in `b` is told by the release of `a` itself (b's recheck is a minute away). */
async function handOff(a: Locks, b: Locks, prefix: string, name: string): Promise<void> {
  const holder = await a.acquire(name, { ttl: 60_000 });
  const waiting = b.acquire(name, { wait: 10_000 });
  await expect.poll(() => redis.raw.zcard(`${prefix}{${name}}:queue`), { timeout: 5000, interval: 5 }).toBe(1);
  const released = performance.now();
  await holder.release();
  const lease = await waiting;
  expect(performance.now() - released).toBeLessThan(1000);
  await lease.release();
}

describe('Valkey GLIDE (GlideClient)', () => {
  beforeAll(() => GlideLogger.setLoggerConfig('error'));

  it('opens one subscriber connection of its own for waiting, closes it with the manager, and leaves the user\'s client open', async () => {
    const client = await glide();
    const prefix = uniquePrefix();
    const before = await subscribers();
    const a = createLocks({ redis: client, prefix });
    const b = createLocks({ redis: client, prefix, recheck: 60_000 });
    expect(b.backend).toBe('redis (valkey-glide)');
    await handOff(a, b, prefix, 'sub');
    expect(await subscribers()).toBe(before + 1); // b's inbox; a never waited
    await a.close();
    await b.close();
    await expect.poll(subscribers, { timeout: 5000, interval: 10 }).toBe(before);
    expect(await client.customCommand(['PING'])).toBe('PONG');
  });

  it("reads the server's eviction policy and its connection's identity (replica acknowledgement's same-connection check)", async () => {
    const client = await glide();
    const adapter = adaptClient(client);
    const reply = await adapter.configGet!('maxmemory-policy');
    expect(JSON.stringify(reply)).toContain('maxmemory-policy');
    const id = await adapter.connectionId!();
    expect(id).toMatch(/^[0-9a-f]{40}:\d+$/);
    expect(await adapter.connectionId!()).toBe(id); // one multiplexed connection: the same each time
    const logger = { debug: () => {}, info: () => {}, warn: vi.fn(), error: () => {} };
    await redis.raw.config('SET', 'maxmemory-policy', 'allkeys-lru');
    try {
      const locks = createLocks({ redis: client, prefix: uniquePrefix(), logger });
      await (await locks.acquire('evictable')).release();
      await expect.poll(() => logger.warn.mock.calls.length, { timeout: 5000, interval: 10 }).toBe(1);
      expect(JSON.stringify(logger.warn.mock.calls[0])).toContain('allkeys-lru');
      await locks.close();
    } finally {
      await redis.raw.config('SET', 'maxmemory-policy', 'noeviction');
    }
  });

  it('works with a client that decodes replies as bytes and speaks RESP2 (its subscriber still uses RESP3)', async () => {
    const client = await glide({ defaultDecoder: Decoder.Bytes, protocol: ProtocolVersion.RESP2 });
    const prefix = uniquePrefix();
    const a = createLocks({ redis: client, prefix });
    const b = createLocks({ redis: client, prefix, recheck: 60_000 });
    try {
      await handOff(a, b, prefix, 'bytes');
      const lease = await a.acquire('listed', { ttl: 60_000 });
      expect((await a.list()).map((info) => info.name)).toEqual(['listed']);
      expect(await a.inspect('listed')).toMatchObject({ name: 'listed', fence: lease.fence });
      await lease.release();
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('does not copy the user\'s subscriptions or callback into its subscriber', async () => {
    const received: unknown[] = [];
    const client = await glide({
      pubsubSubscriptions: {
        channelsAndPatterns: { [GlideClientConfiguration.PubSubChannelModes.Exact]: new Set(['user-news']) },
        callback: (msg) => received.push(msg),
      },
    });
    const prefix = uniquePrefix();
    const a = createLocks({ redis: client, prefix });
    const b = createLocks({ redis: client, prefix, recheck: 60_000 });
    try {
      await handOff(a, b, prefix, 'own');
      expect(await redis.raw.pubsub('NUMSUB', 'user-news')).toEqual(['user-news', 1]); // the user's connection only
      expect(received).toEqual([]);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('without the client\'s configuration to copy, makes no subscriber and says why; waiters fall back to their recheck', async () => {
    const client = await glide();
    const hidden = Object.create(client, { config: { value: undefined } }) as GlideClient; // as if a GLIDE version kept it elsewhere
    await expect(adaptClient(hidden).createSubscriber()).rejects.toMatchObject({
      name: 'UnsupportedError',
      code: 'UNSUPPORTED',
      message: expect.stringContaining("use strategy: 'backoff'"),
    });
    const prefix = uniquePrefix();
    const before = await subscribers();
    const holder = createLocks({ redis: client, prefix });
    const waiter = createLocks({ redis: hidden, prefix, recheck: 50 });
    try {
      const lease = await holder.acquire('hidden', { ttl: 60_000 });
      const waiting = waiter.acquire('hidden', { wait: 5_000 });
      await lease.release();
      await (await waiting).release();
      expect(await subscribers()).toBe(before);
    } finally {
      await holder.close();
      await waiter.close();
    }
  });

  it('runs a script again with EVAL when the server lost its script cache (GLIDE\'s NoScriptError is recognised)', async () => {
    const client = await glide();
    const locks = createLocks({ redis: client, prefix: uniquePrefix() });
    try {
      await (await locks.acquire('cached')).release();
      await redis.raw.script('FLUSH');
      const lease = await locks.acquire('cached');
      expect(lease.held).toBe(true);
      await lease.release();
    } finally {
      await locks.close();
    }
  });
});
