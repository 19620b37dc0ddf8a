/**
 * Redis Cluster while a lock's slot migrates, through a client whose own command timeout is
 * shorter than its TRYAGAIN retries (issue 19): ioredis 6 Cluster with `commandTimeout: 300`,
 * against ~1.6 s of retries. A waiter's refused attempt then reaches latchkey as "Command timed
 * out", an unknown outcome, not as a refusal. What must hold: the wait is not ended early with a
 * BackendError (it goes on with the same token until latchkey's own deadline); a waiter whose
 * deadline passes during the migration ends with a LockTimeoutError within its bound; and nothing
 * of it is left behind, not even by its timed-out attempts that the client sends again after they
 * timed out, once the migration ends (its queue entry, a lock they took).
 */
import { Cluster } from 'ioredis';
import { describe, expect, it, vi } from 'vitest';
import { clusterLateSends } from '../../src/client/ioredis-adapter.js';
import { createLocks, LockTimeoutError, type Lease, type Locks } from '../../src/index.js';
import { lockKeys } from '../../src/keys.js';
import { useMigratingCluster } from '../helpers/migrating-cluster.js';
import { uniquePrefix } from '../helpers/harness.js';

/** The clients' own command timeout, ms: under ioredis's 16 × 100 ms of TRYAGAIN retries. */
const COMMAND_TIMEOUT = 300;
/** How long the tests keep the slot MIGRATING, ms. */
const HOLD = 2000;
const TTL = 1000;
/** How long ioredis may still send a command after it timed out (the default options), ms. */
const LATE_SENDS = clusterLateSends({});

const mc = useMigratingCluster({ replicasPerMaster: 0 });
const { cleanup, migrating, end, closeLeftOpen } = mc;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

async function manager(prefix: string): Promise<Locks> {
  const client = new Cluster(mc.cluster.startupNodes, { redisOptions: { commandTimeout: COMMAND_TIMEOUT } });
  client.on('error', () => {});
  const locks = createLocks({ redis: client, prefix });
  cleanup.push(async () => {
    await locks.close();
    client.disconnect();
  });
  return locks;
}

function fresh(): [string, string] {
  const prefix = uniquePrefix();
  return [prefix, `job-${prefix.slice(0, -1)}`];
}

/** Settles `promise` into what it gave: the lease or the error, and when. */
function track(promise: Promise<Lease>): { readonly settled: () => { lease?: Lease; error?: unknown; at: number } | undefined; readonly done: Promise<void> } {
  let outcome: { lease?: Lease; error?: unknown; at: number } | undefined;
  const done = promise.then(
    (lease) => void (outcome = { lease, at: performance.now() }),
    (error: unknown) => void (outcome = { error, at: performance.now() }),
  );
  return { settled: () => outcome, done };
}

describe(`Redis Cluster slot held MIGRATING, through ioredis Cluster with commandTimeout ${COMMAND_TIMEOUT} ms`, () => {
  it('(the premise) ioredis still sends a command refused with TRYAGAIN after its commandTimeout failed it: it runs once the migration ends', async () => {
    const [prefix] = fresh();
    const [present, missing] = [`${prefix}{late}:a`, `${prefix}{late}:b`];
    await mc.raw.set(present, '1');
    const client = new Cluster(mc.cluster.startupNodes, { redisOptions: { commandTimeout: COMMAND_TIMEOUT } });
    client.on('error', () => {});
    cleanup.push(async () => client.disconnect());
    await client.get(present);
    const migration = await migrating(present);
    try {
      const started = performance.now();
      // Two keys of the slot, one of them missing on the source: TRYAGAIN, retried by ioredis.
      const sent = client.eval("redis.call('SET', KEYS[2], 'late'); return 1", 2, present, missing);
      await expect(sent).rejects.toThrow('Command timed out');
      expect(performance.now() - started).toBeLessThan(COMMAND_TIMEOUT + 200);
      expect(await mc.raw.exists(missing)).toBe(0);
      await end(migration, 'finish');
      await vi.waitFor(async () => expect(await mc.raw.get(missing)).toBe('late'), { timeout: LATE_SENDS, interval: 20 });
    } finally {
      await closeLeftOpen();
    }
  });

  it(`a waiter waits through ${HOLD} ms of MIGRATING (no BackendError) and gets the lock after the release; nothing is left behind`, async () => {
    const [prefix, name] = fresh();
    const keys = lockKeys(prefix, name);
    const [a, b] = [await manager(prefix), await manager(prefix)];
    const lease = await a.acquire(name, { ttl: TTL, renew: true });
    const migration = await migrating(keys.lock);
    try {
      const waiting = track(b.acquire(name, { ttl: TTL, wait: 20_000 }));
      await sleep(HOLD);
      // Its attempts timed out in the client all along: without the fix, the first one ended the wait.
      expect(waiting.settled()).toBeUndefined();
      expect(lease.held).toBe(true);
      const releasedAt = performance.now();
      await lease.release();
      await end(migration, 'finish');
      await waiting.done;
      const won = waiting.settled()!;
      expect(won.error).toBeUndefined();
      expect(won.at).toBeGreaterThan(releasedAt);
      const next = won.lease!;
      expect(next.fence).toBeGreaterThan(lease.fence);
      const releasedNext = performance.now();
      await next.release();
      // Its attempts that the client sends again after they timed out may run after this release
      // (ioredis retries them for up to ~1.6 s) and take the lock again: it is given back once the
      // client's late sends are over (LATE_SENDS after the last attempt timed out, which was before
      // this release). So nothing is left once that window has passed, and nothing comes after it.
      await vi.waitFor(
        async () => {
          expect(performance.now()).toBeGreaterThan(releasedNext + LATE_SENDS + 500);
          expect(await mc.raw.exists(keys.lock, keys.queue, keys.alive)).toBe(0);
        },
        { timeout: LATE_SENDS + 3000, interval: 100 },
      );
      await sleep(500);
      expect(await mc.raw.exists(keys.lock, keys.queue, keys.alive)).toBe(0);
    } finally {
      await closeLeftOpen();
    }
  });

  it('a waiter whose deadline passes during MIGRATING ends with a LockTimeoutError within its bound, and leaves no queue entry nor a lock its late attempts took', async () => {
    const [prefix, name] = fresh();
    const keys = lockKeys(prefix, name);
    const [a, b] = [await manager(prefix), await manager(prefix)];
    const lease = await a.acquire(name, { ttl: TTL, renew: true });
    const wait = 1500;
    const started = performance.now();
    // A lease of 30 s: a lock its late attempt took and nobody gave back would sit that long.
    const waiting = track(b.acquire(name, { ttl: 30_000, wait }));
    // It found the lock held and queued before the slot migrates.
    await vi.waitFor(async () => expect(await mc.raw.zcard(keys.queue)).toBe(1), { timeout: 2000, interval: 20 });
    const migration = await migrating(keys.lock);
    try {
      await waiting.done;
      const ended = waiting.settled()!;
      expect(ended.error).toBeInstanceOf(LockTimeoutError);
      expect(ended.error).not.toHaveProperty('code', 'BACKEND_ERROR');
      expect(ended.at - started).toBeGreaterThanOrEqual(wait - 10);
      expect(ended.at - started).toBeLessThan(wait + COMMAND_TIMEOUT + 400);
      // Its queue entry is gone (the leave runs on the source, which holds every key it names).
      await vi.waitFor(async () => expect(await mc.raw.zcard(keys.queue)).toBe(0), { timeout: 2000, interval: 50 });
      // The holder releases and the migration ends while the client still retries the waiter's
      // last attempts, which then run on the target and take the free lock with its token.
      await lease.release();
      await end(migration, 'finish');
      let lateWin = false;
      await vi.waitFor(
        async () => {
          const token = await mc.raw.get(keys.lock);
          if (token !== null) lateWin = true;
          expect(token).toBeNull();
          expect(await mc.raw.exists(keys.queue, keys.alive)).toBe(0);
        },
        { timeout: LATE_SENDS + 2000, interval: 50 },
      );
      if (!lateWin) console.info('(no late attempt of the waiter ran after the migration this time)');
    } finally {
      await closeLeftOpen();
    }
    // Free, well before the waiter's 30 s TTL.
    const next = await a.acquire(name, { ttl: TTL, wait: 0 });
    expect(next.fence).toBeGreaterThan(lease.fence);
    await next.release();
  });
});
