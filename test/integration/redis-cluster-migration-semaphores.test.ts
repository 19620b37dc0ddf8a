/**
 * Redis Cluster while the slot of a semaphore, a fair lock or a read-write lock migrates (issue 19):
 * the slot is held MIGRATING on its master (IMPORTING on another), through ioredis Cluster and
 * node-redis createCluster, on 3 masters with a replica each.
 *
 * Their scripts name four or five keys (holders, permits, fence, queue, alive), of which the queue
 * and its alive hash exist only while someone waits, and the holders set only while someone holds:
 * the source node refuses (TRYAGAIN) such a script while only some of them are on it. What must
 * hold: a release during the migration frees the permits at once (well before ioredis's 1.6 s of
 * retries) and wakes the waiters; a waiter, queued before the migration or arriving during it,
 * waits it out (no BackendError) and gets its permits once the migration is over; an acquire during
 * it does too; and nothing is left behind: no permit, no holder, no queue entry.
 */
import { describe, expect, it } from 'vitest';
import type { Lease, LeaseLostError, Locks } from '../../src/index.js';
import { semaphoreKeys, type LockKeys, type SemaphoreKind } from '../../src/keys.js';
import { useMigratingCluster } from '../helpers/migrating-cluster.js';
import { uniquePrefix } from '../helpers/harness.js';

/** How long a test keeps the slot MIGRATING before the step it checks, ms: past ioredis's 1.6 s of TRYAGAIN retries. */
const HOLD = 2000;
/** The leases' TTL: renewed every third of it by the watchdog. */
const TTL = 1000;
/** How long a release during the migration may take, ms (ioredis alone spends 1.6 s on a refused script). */
const RELEASE_BOUND = 1000;
/** How long a waiter that gave up may take to leave the queue, ms (ioredis spends 1.6 s on a refused script first). */
const LEAVE_BOUND = 2500;
/** How long after the migration ends a waiter may take to get its permits, ms. */
const WIN_BOUND = 3000;

const mc = useMigratingCluster({ replicasPerMaster: 1 });
const { migrating, end, closeLeftOpen } = mc;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

type Driver = 'ioredis' | 'node-redis';

const manager = (driver: Driver, prefix: string, recheck?: number): Promise<Locks> => mc.manager(driver, { prefix, ...(recheck === undefined ? {} : { recheck }) });

/** What a test does with one kind of permit lock: hold it whole, wait for it, check it is free. */
interface Subject {
  readonly kind: SemaphoreKind;
  /** Takes what `waitFor` needs, so that a waiter must wait. */
  hold(locks: Locks, name: string): Promise<Lease>;
  /** Waits up to `wait` ms. */
  waitFor(locks: Locks, name: string, wait: number): Promise<Lease>;
  /** One attempt at the whole of it: a lease when nobody holds any of it. */
  tryAll(locks: Locks, name: string): Promise<Lease | null>;
}

const LIMIT = 2;
const subjects: Record<string, Subject> = {
  semaphore: {
    kind: 'sem',
    hold: (l, name) => l.semaphore(name, { limit: LIMIT }).acquire({ ttl: TTL, renew: true, permits: LIMIT }),
    waitFor: (l, name, wait) => l.semaphore(name, { limit: LIMIT }).acquire({ ttl: TTL, renew: true, wait }),
    tryAll: (l, name) => l.semaphore(name, { limit: LIMIT }).tryAcquire({ ttl: TTL, permits: LIMIT }),
  },
  'fair lock': {
    kind: 'fair',
    hold: (l, name) => l.fairLock(name).acquire({ ttl: TTL, renew: true }),
    waitFor: (l, name, wait) => l.fairLock(name).acquire({ ttl: TTL, renew: true, wait }),
    tryAll: (l, name) => l.fairLock(name).tryAcquire({ ttl: TTL }),
  },
  'read-write lock (a read held, a write waits)': {
    kind: 'rw',
    hold: (l, name) => l.readWriteLock(name).read({ ttl: TTL, renew: true }),
    waitFor: (l, name, wait) => l.readWriteLock(name).write({ ttl: TTL, renew: true, wait }),
    tryAll: (l, name) => l.readWriteLock(name).tryWrite({ ttl: TTL }),
  },
};

/** A key prefix and a name of the test's own: the name is the hash tag, so each test has a slot of its own (most likely). */
function fresh(kind: SemaphoreKind): [string, string, LockKeys] {
  const prefix = uniquePrefix();
  const name = `res-${prefix.slice(0, -1)}`;
  return [prefix, name, semaphoreKeys(prefix, name, { limit: 1, permits: 1 }, kind)];
}

/** Times `promise`: its outcome and how long it took, ms. */
async function timed<T>(promise: Promise<T>): Promise<{ ok: true; value: T; ms: number } | { ok: false; error: unknown; ms: number }> {
  const start = performance.now();
  try {
    const value = await promise;
    return { ok: true, value, ms: performance.now() - start };
  } catch (error) {
    return { ok: false, error, ms: performance.now() - start };
  }
}

/** A wait in the background: whether and when it ended, and how. */
function background(promise: Promise<Lease>): { readonly lease: () => Lease | undefined; readonly error: () => unknown; readonly at: () => number | undefined; readonly done: Promise<Lease> } {
  let lease: Lease | undefined;
  let error: unknown;
  let at: number | undefined;
  const done = promise.then(
    (won) => {
      lease = won;
      at = performance.now();
      return won;
    },
    (e: unknown) => {
      error = e;
      at = performance.now();
      throw e;
    },
  );
  done.catch(() => {});
  return { lease: () => lease, error: () => error, at: () => at, done };
}

/** Polls `check` until it holds. */
async function until(check: () => Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error('timed out');
    await sleep(20);
  }
}

/** Nothing of the permit lock is left: no holder, no permit in use, no queue entry (checked with the slot stable). */
async function expectNothingLeft(keys: LockKeys, tokens: readonly string[]): Promise<void> {
  for (const token of tokens) {
    expect(await mc.raw.zscore(keys.lock, token)).toBeNull();
    expect(await mc.raw.hget(keys.holder, token)).toBeNull();
  }
  expect(Number((await mc.raw.hget(keys.holder, '#used')) ?? '0')).toBe(0);
  expect(await mc.raw.zcard(keys.queue)).toBe(0);
  expect(await mc.raw.hlen(keys.alive)).toBe(0);
}

describe.each<Driver>(['ioredis', 'node-redis'])('Redis Cluster slot held MIGRATING, permit locks through %s', (driver) => {
  describe.each(Object.entries(subjects))('%s', (_, subject) => {
    it(`a held permit is released during the migration within ${RELEASE_BOUND} ms, and is free at once after it`, async () => {
      const [prefix, name, keys] = fresh(subject.kind);
      const a = await manager(driver, prefix);
      const lease = await subject.hold(a, name);
      const migration = await migrating(keys.lock);
      try {
        await sleep(TTL); // renewed during the migration
        expect(lease.held).toBe(true);
        const released = await timed(lease.release());
        expect(released).toMatchObject({ ok: true });
        expect(released.ms).toBeLessThan(RELEASE_BOUND);
        expect(lease.state).toBe('released');
        // Freed on the source, where the permits hash still is.
        expect(await migration.source.call('HGET', keys.holder, lease.token)).toBeNull();
        await end(migration, 'abort');
      } finally {
        await closeLeftOpen();
      }
      await expectNothingLeft(keys, [lease.token]);
      const next = await subject.tryAll(a, name);
      expect(next).not.toBeNull();
      expect(next!.fence).toBeGreaterThan(lease.fence);
      await next!.release();
    });

    for (const queued of [true, false]) {
      it(`a waiter ${queued ? 'queued before the migration' : 'that comes during the migration'} waits it out through a release during it (no BackendError), and wins within ${WIN_BOUND} ms of its end; nothing left`, async () => {
        const [prefix, name, keys] = fresh(subject.kind);
        const [a, b] = [await manager(driver, prefix), await manager(driver, prefix)];
        const lease = await subject.hold(a, name);
        let waiter: ReturnType<typeof background> | undefined;
        if (queued) {
          waiter = background(subject.waitFor(b, name, 20_000));
          await until(async () => (await mc.raw.zcard(keys.queue)) > 0); // queued, once its inbox listens
        }
        const migration = await migrating(keys.lock);
        try {
          waiter ??= background(subject.waitFor(b, name, 20_000));
          await sleep(HOLD);
          expect(waiter.error()).toBeUndefined();
          expect(waiter.lease()).toBeUndefined();
          const releasedAt = performance.now();
          const released = await timed(lease.release());
          expect(released).toMatchObject({ ok: true });
          expect(released.ms).toBeLessThan(RELEASE_BOUND);
          await sleep(HOLD);
          expect(waiter.error()).toBeUndefined();
          const endedAt = performance.now();
          await end(migration, 'finish');
          const next = await waiter.done;
          expect(waiter.at()! - endedAt).toBeLessThan(WIN_BOUND);
          expect(waiter.at()!).toBeGreaterThan(releasedAt);
          expect(next.fence).toBeGreaterThan(lease.fence);
          await next.release();
          await expectNothingLeft(keys, [lease.token, next.token]);
        } finally {
          await closeLeftOpen();
        }
      });
    }

    it(`a queued waiter whose wait runs out during the migration ends at its deadline with the refusal, and leaves the queue within ${LEAVE_BOUND} ms`, async () => {
      const [prefix, name, keys] = fresh(subject.kind);
      // A long recheck: a queue entry left behind would stay for 6 × recheck ms.
      const [a, b] = [await manager(driver, prefix), await manager(driver, prefix, 5000)];
      const lease = await subject.hold(a, name);
      const wait = 3000;
      const started = performance.now();
      const waiter = background(subject.waitFor(b, name, wait));
      await until(async () => (await mc.raw.zcard(keys.queue)) > 0);
      const migration = await migrating(keys.lock);
      try {
        // Its attempts run while every key is on the source; after the release (which wakes it)
        // the holders set is gone, and they are refused.
        await lease.release();
        await waiter.done.catch(() => {});
        const error = waiter.error();
        expect(String(error)).toMatch(/TRYAGAIN|Too many Cluster redirections/);
        expect(waiter.at()! - started).toBeGreaterThanOrEqual(wait - 5);
        const endedAt = performance.now();
        // Gone from the source's queue: its last entry taken, the key is gone, and a command on it is sent on (ASK).
        await until(async () => {
          const left = await migration.source.call('ZCARD', keys.queue).catch((e: unknown) => (/^ASK /.test(String((e as Error).message)) ? 0 : Promise.reject(e)));
          return Number(left) === 0;
        }, LEAVE_BOUND + 1000);
        expect(performance.now() - endedAt).toBeLessThan(LEAVE_BOUND);
        await end(migration, 'abort');
        await expectNothingLeft(keys, [lease.token]);
      } finally {
        await closeLeftOpen();
      }
    });

    it(`an acquire during the migration waits it out (no BackendError) and wins within ${WIN_BOUND} ms of its end`, async () => {
      const [prefix, name, keys] = fresh(subject.kind);
      const a = await manager(driver, prefix);
      const used = await subject.hold(a, name); // the semaphore has been used: its fence counter exists
      await used.release();
      const migration = await migrating(keys.lock);
      try {
        const waiter = background(subject.waitFor(a, name, 20_000));
        await sleep(HOLD);
        expect(waiter.error()).toBeUndefined();
        const endedAt = performance.now();
        await end(migration, 'finish');
        const next = await waiter.done;
        expect(waiter.at()! - endedAt).toBeLessThan(WIN_BOUND);
        expect(next.fence).toBeGreaterThan(used.fence);
        await next.release();
        await expectNothingLeft(keys, [used.token, next.token]);
      } finally {
        await closeLeftOpen();
      }
    });
  });
});

describe('Redis Cluster slot held MIGRATING: a waiter whose winning attempt is answered too late', () => {
  // ioredis retries a refused script for ~1.6 s: the attempt a waiter has in flight when the
  // migration ends may win more than a TTL after it was sent, too late to be of use. The waiter
  // tries again with the same token, which finds its permits and refreshes them. It used to give
  // the permits back first, and that release could run after the next attempt (re-sent behind it
  // after a NOSCRIPT or a redirection), leaving the waiter a lease with no permits: seen once here
  // (a LeaseLostError at the waiter's release); the race is narrow on a real cluster, and
  // test/unit/late-win.test.ts makes it happen every time. Here: late wins do happen (a 300 ms TTL
  // against 1.6 s of retries), and every waiter still gets a lease that holds.
  it('returns a lease that holds its permits, through ioredis', async () => {
    const [prefix, name] = fresh('sem');
    const a = await manager('ioredis', prefix);
    const b = await manager('ioredis', prefix);
    const short = 300; // the waiters' TTL: an attempt in flight for longer wins too late
    const kinds = Object.values(subjects);
    const held = await Promise.all(kinds.map((subject) => subject.hold(a, name)));
    const migration = await migrating(semaphoreKeys(prefix, name, { limit: 1, permits: 1 }, 'sem').lock);
    try {
      const waiters = kinds.map((subject) =>
        background(
          subject.kind === 'sem'
            ? b.semaphore(name, { limit: LIMIT }).acquire({ ttl: short, renew: true, wait: 20_000 })
            : subject.kind === 'fair'
              ? b.fairLock(name).acquire({ ttl: short, renew: true, wait: 20_000 })
              : b.readWriteLock(name).write({ ttl: short, renew: true, wait: 20_000 }),
        ),
      );
      for (const lease of held) await lease.release();
      await sleep(HOLD);
      // Neither node has the scripts cached: whatever runs there first is sent again as EVAL.
      await migration.target.call('SCRIPT', 'FLUSH');
      await migration.source.call('SCRIPT', 'FLUSH');
      await end(migration, 'finish');
      const won = await Promise.all(waiters.map((w) => w.done));
      for (const [i, lease] of won.entries()) {
        const keys = semaphoreKeys(prefix, name, { limit: 1, permits: 1 }, kinds[i]!.kind);
        expect(await mc.raw.hget(keys.holder, lease.token), kinds[i]!.kind).not.toBeNull();
        await sleep(short); // renewed meanwhile
        if (lease.held) {
          await lease.release();
        } else {
          // A 300 ms lease may be lost to its own clock when this machine stalls its watchdog
          // (CI once); never to its permits found gone or taken, the bug this test is for.
          const lost = lease.signal.reason as LeaseLostError;
          expect(['expired', 'unreachable'], `${kinds[i]!.kind}: ${String(lost)}`).toContain(lost.reason);
          await lease.release().catch(() => {}); // gives the token back, then reports the loss
        }
        await expectNothingLeft(keys, [held[i]!.token, lease.token]);
      }
    } finally {
      await closeLeftOpen();
    }
  });
});
