/**
 * The start-up warning about a `maxmemory-policy` that can evict lock keys: through the injected
 * logger and the `evictionPolicy` hook, once per server, only when someone listens, and skipped
 * (never failing a lock) when CONFIG GET is refused. On real redis-server processes.
 */
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { checkEvictionPolicy, createLocks, type EvictionPolicyEvent, type Logger } from '../../src/index.js';
import { configValue, evictsKeysWithTtl } from '../../src/backend/eviction-policy.js';
import { managerOver, uniquePrefix } from '../helpers/harness.js';
import { RedisServer } from '../helpers/redis-server.js';

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const step of cleanup.reverse()) await step().catch(() => {});
  cleanup.length = 0;
});

async function server(policy: string): Promise<RedisServer> {
  const s = await RedisServer.start({ args: ['--maxmemory', '50mb', '--maxmemory-policy', policy] });
  cleanup.push(() => s.stop());
  return s;
}

const client = (s: RedisServer, options: { username?: string; password?: string } = {}): Redis =>
  new Redis(s.port, '127.0.0.1', { maxRetriesPerRequest: 1, ...options });

const silentLogger = (): Logger & { warn: ReturnType<typeof vi.fn> } => ({ debug: vi.fn(), info: vi.fn(), warn: vi.fn(), error: vi.fn() });

describe('which policies evict lock keys', () => {
  it('every volatile-* and allkeys-* policy, not noeviction', () => {
    for (const policy of ['volatile-lru', 'volatile-lfu', 'volatile-random', 'volatile-ttl', 'allkeys-lru', 'allkeys-lfu', 'allkeys-random']) {
      expect(evictsKeysWithTtl(policy)).toBe(true);
    }
    expect(evictsKeysWithTtl('noeviction')).toBe(false);
  });

  it('reads a CONFIG GET reply in RESP2 and RESP3 shapes', () => {
    expect(configValue(['maxmemory-policy', 'allkeys-lru'], 'maxmemory-policy')).toBe('allkeys-lru');
    expect(configValue({ 'maxmemory-policy': 'noeviction' }, 'maxmemory-policy')).toBe('noeviction');
    expect(configValue(new Map([['maxmemory', '10']]), 'maxmemory')).toBe('10');
    expect(configValue([], 'maxmemory')).toBeNull();
  });
});

describe('the start-up eviction-policy warning', () => {
  it('warns once through the logger and the hook when the server evicts keys with a TTL (ioredis)', async () => {
    const s = await server('allkeys-lru');
    const redis = client(s);
    const logger = silentLogger();
    let hook!: (event: EvictionPolicyEvent) => void;
    const heard = new Promise<EvictionPolicyEvent>((resolve) => (hook = resolve));
    const locks = managerOver(cleanup, [redis], { redis, prefix: uniquePrefix(), logger, hooks: { evictionPolicy: hook } });
    const event = await heard;
    expect(event).toMatchObject({ policy: 'allkeys-lru', maxmemory: 50 * 1024 * 1024, backend: 'redis (ioredis)' });
    expect(event.node).toBeUndefined();
    expect(logger.warn).toHaveBeenCalledTimes(1);
    expect(logger.warn.mock.calls[0]![0]).toMatchObject({ latchkey: 'evictionPolicy', policy: 'allkeys-lru' });
    expect(String(logger.warn.mock.calls[0]![1])).toMatch(/noeviction/);
    // The lock works all the same, and the check is not repeated.
    await (await locks.acquire('k', { ttl: 1000 })).release();
    expect(logger.warn).toHaveBeenCalledTimes(1);
  });

  it('warns per Redlock node, naming it, and through node-redis', async () => {
    const [evicting, safe] = [await server('volatile-lru'), await server('noeviction')];
    const a = createClient({ url: `redis://127.0.0.1:${evicting.port}` });
    const b = createClient({ url: `redis://127.0.0.1:${safe.port}` });
    await Promise.all([a.connect(), b.connect()]);
    cleanup.push(() => a.close(), () => b.close());
    const events: EvictionPolicyEvent[] = [];
    let done!: () => void;
    const heard = new Promise<void>((resolve) => (done = resolve));
    const locks = createLocks({ redlock: [a, b], prefix: uniquePrefix(), hooks: { evictionPolicy: (e) => (events.push(e), done()) } });
    cleanup.push(() => locks.close());
    await heard;
    // The other node does not evict: it gives no event.
    expect(await checkEvictionPolicy(b)).toMatchObject({ policy: 'noeviction', evictsLockKeys: false });
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ policy: 'volatile-lru', node: `node 0 (127.0.0.1:${evicting.port})` });
  });

  it('is skipped, without failing a lock, when an ACL refuses CONFIG GET', async () => {
    const s = await server('allkeys-lru');
    const admin = client(s);
    cleanup.push(async () => admin.disconnect());
    await admin.call('ACL', 'SETUSER', 'locker', 'on', '>pw', '~*', '&*', '+@all', '-config');
    const redis = client(s, { username: 'locker', password: 'pw' });
    const report = await checkEvictionPolicy(redis);
    expect(report.policy).toBeNull();
    expect(report.evictsLockKeys).toBe(false);
    expect(report.skipped).toMatch(/NOPERM|permission/i);
    const logger = silentLogger();
    const locks = managerOver(cleanup, [redis], { redis, prefix: uniquePrefix(), logger });
    const lease = await locks.acquire('k', { ttl: 1000 });
    // The check was sent at creation, before the acquire, on the same connection: its refusal came first.
    await lease.release();
    expect(logger.warn).not.toHaveBeenCalled();
  });

  it('reports a server that does not evict', async () => {
    const s = await server('noeviction');
    const redis = client(s);
    cleanup.push(async () => redis.disconnect());
    expect(await checkEvictionPolicy(redis)).toEqual({ policy: 'noeviction', maxmemory: 50 * 1024 * 1024, evictsLockKeys: false });
  });
});
