/**
 * Redis Cluster while a lock's slot migrates (issue 19, part 1): the slot is held MIGRATING on its
 * master (IMPORTING on another) for seconds, as a big or interrupted reshard keeps it, through
 * ioredis Cluster and node-redis createCluster (and Valkey GLIDE's GlideClusterClient for the
 * leases), on 3 masters with a replica each.
 *
 * The source node answers TRYAGAIN to a script on keys of the slot of which only some are on it
 * (a lock key with no holder record, no queue); ioredis retries that for ~1.6 s and fails "Too
 * many Cluster redirections", node-redis fails at once. What must hold: a lease renewed throughout
 * is not lost while its key sits intact on the source (same token, same fence) and is released
 * cleanly, during the migration or after it; a waiter that comes during the migration is not
 * ended with a BackendError and gets the lock after the release; no two leases overlap, and
 * fences increase.
 */
import slotOf from 'cluster-key-slot';
import { Cluster } from 'ioredis';
import { describe, expect, it } from 'vitest';
import type { Lease, Locks } from '../../src/index.js';
import { lockKeys } from '../../src/keys.js';
import { useMigratingCluster, type ClusterDriver } from '../helpers/migrating-cluster.js';
import { uniquePrefix } from '../helpers/harness.js';

/** How long each test keeps the slot MIGRATING, ms: past three TTLs, and past ioredis's 1.6 s of TRYAGAIN retries. */
const HOLD = 3500;
/** The leases' TTL: renewed every third of it by the watchdog. */
const TTL = 1000;

const mc = useMigratingCluster({ replicasPerMaster: 1 });
const { cleanup, migrating, end, closeLeftOpen } = mc;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

type Driver = ClusterDriver;

const manager = (driver: Driver, settings: { prefix: string; holder?: boolean }): Promise<Locks> => mc.manager(driver, settings);

/** A key prefix and a lock name of the test's own: the name is the hash tag, so each test has a slot of its own (most likely). */
function fresh(): [string, string] {
  const prefix = uniquePrefix();
  return [prefix, `job-${prefix.slice(0, -1)}`];
}

/** Two lock names of a prefix of the test's own whose keys share one slot (found by trying). */
function twoInOneSlot(): [string, [string, string]] {
  const prefix = uniquePrefix();
  const seen = new Map<number, string>();
  for (let i = 0; ; i++) {
    const name = `pair-${i}`;
    const slot = slotOf(lockKeys(prefix, name).lock);
    const other = seen.get(slot);
    if (other !== undefined) return [prefix, [other, name]];
    seen.set(slot, name);
  }
}

/** Watches a lease: how it ended, if it did, and when release() was called (the end of its hold, for the overlap check). */
function watch(lease: Lease): { readonly lost: () => unknown; readonly acquiredAt: number; releasedAt: number } {
  let reason: unknown;
  lease.signal.addEventListener('abort', () => (reason = lease.signal.reason), { once: true });
  return { lost: () => (lease.lostError ? reason : undefined), acquiredAt: performance.now(), releasedAt: Infinity };
}

/** Polls `check` until it holds (a holder record is written off the acquire's path). */
async function until(check: () => Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error('timed out');
    await sleep(20);
  }
}

describe.each<Driver>(['ioredis', 'node-redis', 'valkey-glide'])('Redis Cluster slot held MIGRATING, through %s', (driver) => {
  for (const holder of [false, true]) {
    it(`a lease renewed by its watchdog keeps its lock through ${HOLD} ms of MIGRATING${holder ? ', its holder recorded' : ''}, and is released during it`, async () => {
      const [prefix, name] = fresh();
      const keys = lockKeys(prefix, name);
      const a = await manager(driver, { prefix, holder });
      const lease = await a.acquire(name, { ttl: TTL, renew: true });
      const seen = watch(lease);
      if (holder) await until(async () => (await a.inspect(name)).holder !== null);
      const migration = await migrating(keys.lock);
      try {
        const stillSource = migration.source;
        await sleep(HOLD);
        expect(seen.lost()).toBeUndefined();
        expect(lease.held).toBe(true);
        // The key never moved: it sits on the source, with the lease's token, alive.
        expect(await stillSource.call('GET', keys.lock)).toBe(lease.token);
        expect(Number(await stillSource.call('PTTL', keys.lock))).toBeGreaterThan(0);
        // Released while the slot still migrates.
        seen.releasedAt = performance.now();
        await lease.release();
        expect(lease.state).toBe('released');
        // Gone from the source: a command on the key alone is sent on to the target (ASK).
        await expect(stillSource.call('GET', keys.lock)).rejects.toThrow(/^ASK /);
        await end(migration, 'abort');
      } finally {
        await closeLeftOpen();
      }
      // The lock is free and its next fence is above the lease's.
      const next = await a.acquire(name, { ttl: TTL, wait: 5000 });
      expect(next.fence).toBeGreaterThan(lease.fence);
      await next.release();
    });
  }

  it(`two leases whose locks share the migrating slot, one key moved and one not: their batched renewal is refused (TRYAGAIN), each is renewed alone, and both are held through ${HOLD} ms`, async () => {
    const [prefix, names] = twoInOneSlot();
    const keys = names.map((name) => lockKeys(prefix, name));
    const a = await manager(driver, { prefix });
    const leases = await Promise.all(names.map((name) => a.acquire(name, { ttl: TTL, renew: true })));
    const seen = leases.map(watch);
    const migration = await migrating(keys[0]!.lock);
    try {
      // The first lock key on the target, the second on the source: a script naming both is refused.
      expect(await migration.source.call('MIGRATE', migration.target.host, migration.target.port, keys[0]!.lock, 0, 5000)).toBe('OK');
      await sleep(HOLD);
      for (const s of seen) expect(s.lost()).toBeUndefined();
      for (const lease of leases) expect(lease.held).toBe(true);
      expect(await migration.source.call('GET', keys[1]!.lock)).toBe(leases[1]!.token);
      await end(migration, 'finish');
      // Both keys on the target now, each with its lease's token.
      for (const [i, key] of keys.entries()) expect(await migration.target.call('GET', key.lock)).toBe(leases[i]!.token);
      await Promise.all(leases.map((lease) => lease.release()));
    } finally {
      await closeLeftOpen();
    }
  });

  // GLIDE retries TRYAGAIN itself until its request timeout and then reports a TimeoutError, an
  // unknown outcome: the waiter counts it as busy and tries again with the same token.
  it('a waiter that comes during the migration waits it out (no BackendError), and gets the lock after the release; no overlap, fences increase', async () => {
    const [prefix, name] = fresh();
    const keys = lockKeys(prefix, name);
    const [a, b] = [await manager(driver, { prefix }), await manager(driver, { prefix })];
    const lease = await a.acquire(name, { ttl: TTL, renew: true });
    const first = watch(lease);
    const migration = await migrating(keys.lock);
    let second: ReturnType<typeof watch> | undefined;
    let waiterError: unknown;
    const waiting = b.acquire(name, { ttl: TTL, wait: 20_000, renew: true }).then(
      (won) => {
        second = watch(won);
        return won;
      },
      (error: unknown) => {
        waiterError = error;
        throw error;
      },
    );
    waiting.catch(() => {});
    try {
      await sleep(HOLD);
      expect(waiterError).toBeUndefined();
      expect(second).toBeUndefined();
      expect(first.lost()).toBeUndefined();
      // The migration completes: every key of the slot moves to the target, which now serves it.
      await end(migration, 'finish');
      expect(await mc.cluster.masterForKey(keys.lock)).toBe(migration.target);
      await sleep(TTL); // renewed on the target now
      expect(lease.held).toBe(true);
      expect(second).toBeUndefined();
      first.releasedAt = performance.now();
      await lease.release();
      const next = await waiting;
      expect(second!.acquiredAt).toBeGreaterThan(first.releasedAt);
      expect(next.fence).toBeGreaterThan(lease.fence);
      await next.release();
    } finally {
      await closeLeftOpen();
    }
  });

  it('a lease renewed with explicit extends while its keys already sit on the target (the slot still MIGRATING: ASK) stays held, and is released after the migration', async () => {
    const [prefix, name] = fresh();
    const keys = lockKeys(prefix, name);
    const a = await manager(driver, { prefix });
    const lease = await a.acquire(name, { ttl: TTL });
    const seen = watch(lease);
    const migration = await migrating(keys.lock);
    try {
      // The source holds none of the lock's keys now: it sends a command on them to the target
      // (ASK), which runs it when it holds every key it names (or it names one).
      expect(await migration.moveKeys()).toBeGreaterThanOrEqual(2); // the lock and its fence counter
      for (const stop = performance.now() + HOLD; performance.now() < stop; ) {
        await lease.extend();
        await sleep(TTL / 3);
      }
      expect(seen.lost()).toBeUndefined();
      expect(Number(await migration.source.call('CLUSTER', 'COUNTKEYSINSLOT', migration.slot))).toBe(0);
      await end(migration, 'finish');
      await lease.extend();
      expect(await migration.target.call('GET', keys.lock)).toBe(lease.token);
      await lease.release();
    } finally {
      await closeLeftOpen();
    }
    const next = await a.acquire(name, { ttl: TTL, wait: 5000 });
    expect(next.fence).toBeGreaterThan(lease.fence);
    await next.release();
  });
});

describe('Redis Cluster slot held MIGRATING: a release that drops the last queued waiters', () => {
  // Every key of the lock sits on the source (a holder record, a queue entry): the script runs
  // there, and may not name a key it deleted itself (Redis answers as if it had moved). Before the
  // fix, release.lua popped the emptied queue again and failed ("Script attempted to access a non
  // local key") after giving the lock to the dead waiter, whose lease then sat until its TTL.
  it('frees the lock at once, the dead waiter dropped, through ioredis', async () => {
    const [prefix, name] = fresh();
    const keys = lockKeys(prefix, name);
    const a = await manager('ioredis', { prefix, holder: true });
    const lease = await a.acquire(name, { ttl: TTL });
    await until(async () => (await a.inspect(name)).holder !== null);
    // A waiter whose process is gone, already passed over once (" -"): nobody listens on its inbox.
    const raw = new Cluster(mc.cluster.startupNodes);
    cleanup.push(async () => raw.disconnect());
    const member = 'gone-manager:1';
    await raw.zadd(keys.queue, '1', member);
    await raw.hset(keys.alive, member, `${Date.now() + 60_000} ${TTL} ${'ab'.repeat(16)} -`);
    const migration = await migrating(keys.lock);
    try {
      await lease.release();
      expect(lease.state).toBe('released');
      // Nothing of the lock is left on the source (no key given to the dead waiter, no queue
      // entry): a command on any of its keys is sent on to the target (ASK).
      for (const key of [keys.lock, keys.queue, keys.alive, keys.holder]) {
        await expect(migration.source.call('EXISTS', key)).rejects.toThrow(/^ASK /);
      }
      await end(migration, 'abort');
    } finally {
      await closeLeftOpen();
    }
    const next = await a.acquire(name, { ttl: TTL, wait: 0 });
    expect(next.fence).toBeGreaterThan(lease.fence);
    await next.release();
  });
});
