/**
 * Batched watchdog renewals (src/lease/renewals.ts) on real redis-server processes: the leases of
 * a manager due at about the same time are renewed in one extend-many.lua call per 500 leases,
 * each lease with its own outcome.
 *
 * The chosen backend is wrapped (see wrapped-backend.ts) only so that one test can hold a batch
 * before it is sent to Redis: every reply still comes from Redis.
 */
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Backend, ExtendManyReply } from '../../src/backend/backend.js';
import { createLocks, type Lease, type Locks, type LocksOptions, type RenewFailedEvent } from '../../src/index.js';
import { lockKeys } from '../../src/keys.js';
import { extendManyScript } from '../../src/lua/scripts.generated.js';
import { aborted } from '../contract/lock-contract.js';
import { uniquePrefix } from '../helpers/harness.js';
import { renewalCounts } from '../helpers/renewal-counts.js';
import { RedisServer } from '../helpers/redis-server.js';

/**
 * A gate for batches: a batch that finds `gate.open` set tells `waiting`, waits for it before it
 * sends anything to Redis, tells `forwarded` once sent, and `replied` with Redis's replies.
 */
const gate: {
  open?: Promise<void> | undefined;
  waiting?: () => void;
  forwarded?: () => void;
  replied?: (replies: ExtendManyReply | undefined) => void;
} = {};

vi.mock('../../src/backend/choose.js', async (importOriginal) =>
  (await import('../helpers/wrapped-backend.js')).wrapChosenBackend(await importOriginal<typeof import('../../src/backend/choose.js')>(), (backend) => ({
    async extendMany(...call: Parameters<NonNullable<Backend['extendMany']>>) {
      const held = gate.open;
      if (!held) return backend.extendMany!(...call);
      gate.waiting?.();
      await held;
      const sending = backend.extendMany!(...call);
      gate.forwarded?.();
      const replies = await sending;
      gate.replied?.(replies);
      return replies;
    },
  })),
);

/** Holds the next batch at the gate: resolves once one waits there, with the function that lets it go and what it does then. */
async function holdNextBatch(): Promise<{ release: () => Promise<void>; replies: Promise<ExtendManyReply | undefined> }> {
  let open!: () => void;
  gate.open = new Promise<void>((resolve) => (open = resolve));
  cleanup.push(async () => open());
  await new Promise<void>((resolve) => (gate.waiting = resolve));
  gate.open = undefined; // later batches go straight through
  const replies = new Promise<ExtendManyReply | undefined>((resolve) => (gate.replied = resolve));
  const release = async (): Promise<void> => {
    const forwarded = new Promise<void>((resolve) => (gate.forwarded = resolve));
    open();
    await forwarded;
  };
  return { release, replies };
}

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

async function server(): Promise<RedisServer> {
  const s = await RedisServer.start();
  cleanup.push(() => s.stop());
  return s;
}

function raw(s: RedisServer): Redis {
  const client = new Redis(s.port, '127.0.0.1', { lazyConnect: false });
  cleanup.push(async () => client.disconnect());
  return client;
}

/** The few ioredis settings a test changes. */
interface ClientSettings {
  readonly enableOfflineQueue?: boolean;
  readonly maxRetriesPerRequest?: number;
  readonly retryStrategy?: () => number;
}

async function manager(s: RedisServer, settings: Omit<LocksOptions, 'redis'>, client: ClientSettings = {}): Promise<Locks> {
  const redis = new Redis(s.port, '127.0.0.1', client);
  redis.on('error', () => {});
  if (redis.status !== 'ready') await new Promise((resolve) => redis.once('ready', resolve));
  const locks = createLocks({ ...settings, redis });
  cleanup.push(async () => {
    await locks.close().catch(() => {});
    redis.disconnect();
  });
  return locks;
}

/** Script calls (EVALSHA and EVAL) the server ran since its stats were reset. */
async function scriptCalls(client: Redis): Promise<number> {
  const info = await client.info('commandstats');
  const calls = (name: string): number => Number(new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(info)?.[1] ?? 0);
  return calls('evalsha') + calls('eval');
}

/** Resolves once the manager's `renewFailed` hook reported each lease's loss (its renewal in flight settled with it). */
function reportedLost(failures: RenewFailedEvent[], leases: readonly Lease[]): Promise<void> {
  return vi.waitFor(() => {
    for (const lease of leases) expect(failures.some((f) => f.key === lease.key && f.error === lease.lostError)).toBe(true);
  });
}

/** When each lease's signal aborted (performance.now()), its validity then, and the reason. */
function endings(leases: readonly Lease[]): Promise<Array<{ at: number; validUntil: number; reason: unknown }>> {
  return Promise.all(leases.map(async (lease) => ({ reason: await aborted(lease.signal), at: performance.now(), validUntil: lease.validUntil })));
}

describe('batched watchdog renewals on one Redis', () => {
  it('extend-many.lua answers only the leases it did not extend (gone, taken, WRONGTYPE), extends the others, and refuses tokens of another length', async () => {
    const r = raw(await server());
    const token = (i: number): string => String(i).padStart(6, '0');
    await r.set('ok1', token(1), 'PX', 1000);
    await r.set('taken', 'x'.repeat(6), 'PX', 1000);
    await r.hset('hash', 'f', 'v');
    await r.set('ok5', token(5), 'PX', 1000);
    const keys = ['ok1', 'gone', 'taken', 'hash', 'ok5'];
    const tokens = keys.map((_, i) => token(i + 1)).join('');
    const run = (args: string[]): Promise<unknown> => r.eval(extendManyScript.source, keys.length, ...keys, ...args);
    expect(await run(['60000', '6', tokens])).toEqual([2, 0, 3, -1, 4, -2]);
    for (const key of ['ok1', 'ok5']) expect(await r.pttl(key)).toBeGreaterThan(30_000);
    expect(await r.pttl('taken')).toBeLessThanOrEqual(1000);
    expect(await r.exists('gone')).toBe(0);
    // All extended: an empty reply.
    expect(await r.eval(extendManyScript.source, 2, 'ok1', 'ok5', '60000', '6', token(1) + token(5))).toEqual([]);
    // Tokens that do not fill n * w characters: an error, nothing extended.
    await r.pexpire('ok1', 1000);
    await expect(run(['60000', '6', tokens.slice(1)])).rejects.toThrow(/extend-many: 5 keys, but 29 characters of tokens of length 6/);
    await expect(run(['60000', '0', ''])).rejects.toThrow(/extend-many/);
    expect(await r.pttl('ok1')).toBeLessThanOrEqual(1000);
  });

  it('a batch in which some keys are gone or taken loses exactly those leases; the others stay held, their TTL renewed', async () => {
    const s = await server();
    const r = raw(s);
    const prefix = uniquePrefix();
    const count = renewalCounts();
    const locks = await manager(s, { prefix, hooks: { renewed: count.renewed } });
    const TTL = 2000;
    const names = ['a', 'b', 'c', 'd', 'e', 'f'];
    const leases = await Promise.all(names.map((name) => locks.acquire(name, { ttl: TTL, renew: { every: 100 } })));
    const [deleted, taken, ...kept] = leases as [Lease, Lease, ...Lease[]];
    // One key deleted, one taken over by another token, between two batches.
    await r.del(lockKeys(prefix, 'a').lock);
    await r.set(lockKeys(prefix, 'b').lock, 'someone-else', 'PX', 60_000);
    const [lostDeleted, lostTaken] = await endings([deleted, taken]);
    expect(lostDeleted!.reason).toMatchObject({ code: 'LEASE_LOST', reason: 'gone', key: 'a' });
    expect(lostTaken!.reason).toMatchObject({ code: 'LEASE_LOST', reason: 'taken', key: 'b' });
    // Learned at the next batch, well before their validity would have ended.
    expect(lostDeleted!.at).toBeLessThan(lostDeleted!.validUntil);
    expect(lostTaken!.at).toBeLessThan(lostTaken!.validUntil);
    // The other four were in the same batches: renewed again after the losses (twice each), still held.
    await count.reached(count.seen + 4 * 2);
    for (const lease of kept) expect(lease.state).toBe('held');
    // Their keys hold their tokens with a TTL renewed within the last interval or two (not counting down from the acquire).
    for (const [i, lease] of kept.entries()) {
      const key = lockKeys(prefix, names[i + 2]!).lock;
      expect(await r.get(key)).toBe(lease.token);
      expect(await r.pttl(key)).toBeGreaterThan(TTL - 300);
    }
    // The taken key is left to its new holder.
    expect(await r.get(lockKeys(prefix, 'b').lock)).toBe('someone-else');
    await Promise.all(kept.map((lease) => lease.release()));
  });

  it('a batch that gets no reply (server stopped) loses no lease before its validity, and signals each as unreachable when it runs out', async () => {
    const s = await server();
    const prefix = uniquePrefix();
    const failures: RenewFailedEvent[] = [];
    const locks = await manager(s, { prefix, hooks: { renewFailed: (e) => failures.push(e) } });
    // Validities a few intervals apart: each is signalled at its own, not at the first.
    const leases = await Promise.all([400, 600, 800].map((ttl, i) => locks.acquire(`k${i}`, { ttl, renew: { every: 100 } })));
    s.pause(); // SIGSTOP: the connection stays open, nothing is answered
    cleanup.push(async () => s.resume());
    const ended = await endings(leases);
    for (const e of ended) {
      expect(e.reason).toMatchObject({ code: 'LEASE_LOST', reason: 'unreachable' });
      expect(e.at).toBeGreaterThanOrEqual(e.validUntil); // never before its validity
      expect(e.at - e.validUntil).toBeLessThan(250); // and at its end (a loaded machine's timers may be late)
    }
    expect(ended[0]!.at).toBeLessThan(ended[1]!.at);
    expect(ended[1]!.at).toBeLessThan(ended[2]!.at);
    // Each renewal in flight was reported as failed, with the loss.
    await reportedLost(failures, leases);
  });

  it('a batch that fails (server down, no offline queue) is retried while validity remains, and each lease is lost as unreachable when it runs out', async () => {
    const s = await server();
    const prefix = uniquePrefix();
    const failures: RenewFailedEvent[] = [];
    const locks = await manager(s, { prefix, hooks: { renewFailed: (e) => failures.push(e) } }, { enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => 50 });
    const leases = await Promise.all([500, 700].map((ttl, i) => locks.acquire(`k${i}`, { ttl, renew: { every: 100 } })));
    await s.kill();
    const ended = await endings(leases);
    for (const e of ended) {
      expect(e.reason).toMatchObject({ code: 'LEASE_LOST', reason: 'unreachable' });
      expect(e.at).toBeGreaterThanOrEqual(e.validUntil);
      expect(e.at - e.validUntil).toBeLessThan(250);
    }
    // Several failed batches per lease before its validity ran out: retried, not given up at the
    // first error (each failed at once: none was in flight when the validity ran out).
    for (const lease of leases) expect(failures.filter((f) => f.key === lease.key).length).toBeGreaterThan(2);
  });

  it('a lease released while its batch is in flight ends released, not lost, even when the batch runs after the release', async () => {
    const s = await server();
    const r = raw(s);
    const prefix = uniquePrefix();
    const locks = await manager(s, { prefix });
    const [released, kept] = (await Promise.all(['rel', 'keep'].map((name) => locks.acquire(name, { ttl: 2000, renew: { every: 100 } })))) as [Lease, Lease];
    // The next batch (carrying both leases) is held before it reaches Redis; one lease is released meanwhile.
    const batch = await holdNextBatch();
    await expect(released.release()).resolves.toBeUndefined(); // its key is deleted in Redis now
    await batch.release(); // the batch runs in Redis after the release
    const replies = await batch.replies;
    // Redis found the released key gone, and extended the other; the batch's reply for the released lease is ignored.
    expect([...(replies ?? [])].sort()).toEqual(['gone', 'ok']); // in the order the leases were due
    expect(released.state).toBe('released');
    expect(released.lostError).toBeUndefined();
    expect(await r.exists(lockKeys(prefix, 'rel').lock)).toBe(0); // PEXPIRE did not recreate it
    expect(kept.state).toBe('held');
    expect(await r.get(lockKeys(prefix, 'keep').lock)).toBe(kept.token);
    await kept.release();
  });

  it('a lease released while its batch waits in Redis (CLIENT PAUSE) ends released; release() resolves', async () => {
    const s = await server();
    const r = raw(s);
    const prefix = uniquePrefix();
    const count = renewalCounts();
    const locks = await manager(s, { prefix, hooks: { renewed: count.renewed } });
    const lease = await locks.acquire('paused', { ttl: 3000, renew: { every: 100 } });
    // A first batch loads extend-many.lua: a batch that met NOSCRIPT would be sent again after the release.
    await count.reached(1);
    const batch = await holdNextBatch();
    await r.call('CLIENT', 'PAUSE', '300', 'ALL');
    await batch.release(); // sent: Redis runs it when the pause ends
    const releasing = lease.release(); // sent after the batch, on the same connection
    await expect(releasing).resolves.toBeUndefined();
    expect(await batch.replies).toEqual(['ok']); // the batch ran first, and extended the key
    expect(lease.state).toBe('released');
    expect(await r.exists(lockKeys(prefix, 'paused').lock)).toBe(0);
  });

  it('N leases on the same schedule are renewed in ceil(N / 500) script calls per round', async () => {
    const s = await server();
    const r = raw(s);
    const prefix = uniquePrefix();
    const N = 1200;
    const count = renewalCounts();
    const locks = await manager(s, { prefix, hooks: { renewed: count.renewed } });
    // Acquired within the first batch's window (a quarter of `every`: 500 ms), so on one schedule.
    const leases = await Promise.all(Array.from({ length: N }, (_, i) => locks.acquire(`n${i}`, { ttl: 6000, renew: { every: 2000 } })));
    await count.reached(N); // a first round: it loads extend-many.lua (EVALSHA, NOSCRIPT, EVAL)
    await r.call('CONFIG', 'RESETSTAT');
    await count.reached(3 * N); // two more rounds
    const calls = await scriptCalls(r);
    expect(calls).toBeLessThanOrEqual(2 * Math.ceil(N / 500));
    expect(calls).toBeGreaterThanOrEqual(2 * Math.ceil(N / 500)); // and not fewer: batches hold 500 at most
    for (const lease of leases) expect(lease.state).toBe('held');
    await r.call('CONFIG', 'RESETSTAT');
    await Promise.all(leases.map((lease) => lease.release()));
  });
});
