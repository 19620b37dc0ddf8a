/**
 * The give-up contract (issue 17): a caller that stops waiting, because its signal aborted or its
 * `wait` ran out, even while its first attempt is still in flight, leaves nothing behind. Its
 * promise rejects promptly with the right error (`signal.reason`, or a LockTimeoutError); its
 * entry in the wait queue of the lock (or semaphore, fair or read-write lock) is gone once its
 * clean-up ran; and the holder's release serves the real next waiter at once, instead of granting
 * the lock to the entry of a caller that is no longer there (which left the lock held by nobody
 * for a whole TTL) or waking that entry (which left the next waiter asleep until its recheck).
 *
 * The scenario of most tests: manager `holding` holds the lock; manager `gaveUp` has waited for it
 * before, so its inbox listens and its first attempt queues in the backend at once; it calls
 * acquire and gives up during that attempt. Every manager here re-checks every 2 s: a queue entry
 * lives 3 re-checks (6 s, longer than any test), and a waiter that the release does not serve
 * sleeps 2 s, far past the 500 ms a served one may take.
 *
 * Run from each test/contract/*.test.ts (and test/integration/redis-replication.test.ts) with what
 * its backend can do; each test uses its own key prefix, so nothing is flushed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Lease, LockTimeoutError, MultiLease, QuorumError, UnreachableError, type AcquireOptions, type AcquiredEvent, type Locks } from '../../src/index.js';
import type { SemaphoreKind } from '../../src/keys.js';
import { uniquePrefix, type BackendHarness } from '../helpers/harness.js';

/** What a backend offers for these tests; a test of something it lacks is not registered. */
export interface GiveUpCapabilities {
  /** Counting semaphores, and the fair and read-write locks made of them (not over Redlock, nor in compat mode). */
  readonly semaphores: boolean;
  /** The harness can stall the server ({@link BackendHarness.stall}): real servers only. */
  readonly stalls: boolean;
  /**
   * Redlock: a wait that runs out while the nodes do not answer rejects with a QuorumError (the
   * vote was left undecided), not a LockTimeoutError.
   */
  readonly quorum?: boolean;
}

/** Every manager's `recheck`, ms: see the file's comment. */
const RECHECK = 2000;
/** The `wait` of a caller whose wait runs out during its first attempt, ms. */
const SHORT_WAIT = 100;
/** How long a stall holds Redis's writes, ms: longer than SHORT_WAIT plus GRACE. */
const STALL = 700;
/** How long past its `wait` a caller that gave up may take to reject, ms. */
const GRACE = 400;
/** How long an aborted caller may take to reject, ms. */
const ABORT_GRACE = 150;
/** How long after the release the next waiter may take to get the lock, ms (far below RECHECK). */
const SERVED_WITHIN = 500;
/** The next waiter's `wait`, ms: below RECHECK, so a waiter the release did not serve times out. */
const NEXT_WAIT = 1000;
/** How long a queue entry of a caller that gave up may outlive its clean-up's start, ms (far below an entry's 6 s). */
const LEAVE_WITHIN = 500;

/** How a call that gave up ended: its error (or what it resolved to), and when, ms after the call. */
interface Ending {
  readonly error: unknown;
  readonly after: number;
}

/** Runs `call` and reports how it ended, measured on the test's clock from the call. */
function ending(call: () => Promise<unknown>): { readonly ended: Promise<Ending> } {
  const started = performance.now();
  return {
    ended: call().then(
      (value) => ({ error: value, after: performance.now() - started }),
      (error: unknown) => ({ error, after: performance.now() - started }),
    ),
  };
}

/** Gives back what a call that should have rejected resolved to, so that it holds nothing after the test. */
async function giveBack(outcome: unknown): Promise<void> {
  if (outcome instanceof Lease || outcome instanceof MultiLease) await outcome.release().catch(() => {});
}

const PERMIT_KINDS = ['sem', 'fair', 'rw'] as const satisfies readonly SemaphoreKind[];
const KIND_NAMES: Record<SemaphoreKind, string> = { sem: 'semaphore', fair: 'fair lock', rw: 'read-write lock (writer)' };

/** One permit's acquire on a semaphore of one permit, a fair lock, or a read-write lock's write side. */
function permitsOf(locks: Locks, kind: SemaphoreKind, name: string): (options: AcquireOptions) => Promise<Lease> {
  if (kind === 'sem') return (options) => locks.semaphore(name, { limit: 1 }).acquire(options);
  if (kind === 'fair') return (options) => locks.fairLock(name).acquire(options);
  return (options) => locks.readWriteLock(name).write(options);
}

export function giveUpContract(makeHarness: () => Promise<BackendHarness>, can: GiveUpCapabilities): void {
  // A test of a capability the backend lacks is not registered (not skipped): it does not apply.
  const itIf = (capable: boolean) => (capable ? it : (_name: string, _fn: () => Promise<void>): void => undefined);
  let h: BackendHarness;
  let prefix: string;
  const locks = (settings: Parameters<BackendHarness['locks']>[0] = {}): Locks => h.locks({ prefix, recheck: RECHECK, ...settings });
  const fresh = (): void => {
    prefix = uniquePrefix();
  };
  const stall = (ms: number, behind?: Locks): Promise<void> => {
    if (!h.stall) throw new Error(`${h.name}: the harness was said to stall the server, and has no stall()`);
    return h.stall(ms, behind);
  };

  beforeAll(async () => {
    h = await makeHarness();
  });
  afterAll(async () => {
    await h.close();
  });

  /** Waiters queued in the backend for the lock `name` (kind undefined), or for the semaphore-like `name` of `kind`. */
  const queueLength = (name: string, kind?: SemaphoreKind): Promise<number> =>
    kind === undefined ? h.queued(prefix, name) : h.semaphoreQueued(prefix, name, kind);

  /** Resolves once at least `count` waiters are queued. Polls: queueing happens inside the backend, and no event of the API tells. */
  const queued = async (name: string, kind: SemaphoreKind | undefined, count: number): Promise<void> => {
    const end = performance.now() + 5000;
    while ((await queueLength(name, kind)) < count) {
      if (performance.now() > end) throw new Error(`no ${count} waiter(s) queued for "${name}" within 5 s`);
      await new Promise((r) => setTimeout(r, 2));
    }
  };

  /**
   * Resolves once the backend ran everything `gaveUp` sent for `name` (the attempt it gave up on
   * included): a look through its own connection, which the backend answers in order, and a write
   * that waits behind those a stall held back.
   */
  const settled = async (gaveUp: Locks, name: string): Promise<void> => {
    await gaveUp.inspect(name).catch(() => undefined);
    await h.caughtUp?.();
  };

  /**
   * Soft-asserts that the queue of `name` is empty within LEAVE_WITHIN ms. A bounded poll on the
   * server's state: the clean-up's leave is the backend's business, and no event of the API tells.
   */
  const expectQueueEmpties = async (name: string, kind: SemaphoreKind | undefined, who: string): Promise<void> => {
    const end = performance.now() + LEAVE_WITHIN;
    let left = await queueLength(name, kind);
    while (left > 0 && performance.now() < end) {
      await new Promise((r) => setTimeout(r, 5));
      left = await queueLength(name, kind);
    }
    expect.soft(left, `${who}: queue entries left in the backend ${LEAVE_WITHIN} ms after the caller that gave up was done`).toBe(0);
  };

  /**
   * The release that follows: a waiter of a third manager, queued behind whatever the caller that
   * gave up left, must get the lock within SERVED_WITHIN ms of the holder's release (not at its
   * recheck, 2 s, nor at the end of a TTL). Soft assertions: every way the test fails is reported.
   */
  const expectNextServed = async (
    name: string,
    kind: SemaphoreKind | undefined,
    acquire: (next: Locks) => Promise<Lease>,
    release: () => Promise<void>,
  ): Promise<void> => {
    const next = locks();
    const before = await queueLength(name, kind);
    const waiting = acquire(next).then(
      (lease) => ({ lease, at: performance.now() }),
      (error: unknown) => ({ error, at: performance.now() }),
    );
    await queued(name, kind, before + 1);
    const released = performance.now();
    await release();
    const outcome = await waiting;
    if ('lease' in outcome) {
      expect
        .soft(outcome.at - released, `ms from the release until the next waiter got the lock (one it did not serve sleeps until its recheck, ${RECHECK} ms, or the end of its wait, ${NEXT_WAIT} ms)`)
        .toBeLessThan(SERVED_WITHIN);
      await outcome.lease.release();
    } else {
      expect.soft(outcome.error, `the next waiter (wait ${NEXT_WAIT} ms) did not get the lock after the release`).toBeInstanceOf(Lease);
    }
  };

  describe('a lock caller that gives up during its first attempt leaves nothing behind', () => {
    /**
     * `holding` holds `name`; `gaveUp` waited for it once (its waiter queued, so its inbox
     * listens) and got it. Its next first attempt queues at once.
     */
    const setUp = async (name: string): Promise<{ holder: Lease; gaveUp: Locks }> => {
      const [holding, gaveUp] = [locks(), locks()];
      const first = await holding.acquire(name, { ttl: 10_000 });
      const waited = gaveUp.acquire(name, { wait: 5000 });
      await queued(name, undefined, 1);
      await first.release();
      await (await waited).release();
      // Over Redlock the win's leave to a node that did not vote for it is sent behind the
      // acquire and not awaited; the release resolves at a majority. Both have run once
      // gaveUp's own look at every node came back (behind them on the same connections).
      await settled(gaveUp, name);
      expect(await queueLength(name), 'queue entries before the test').toBe(0);
      return { holder: await holding.acquire(name, { ttl: 10_000 }), gaveUp };
    };

    /** After the caller gave up: its queue entry goes, the next waiter is served, and the lock ends free. */
    const expectNothingLeft = async (name: string, holder: Lease, gaveUp: Locks): Promise<void> => {
      await settled(gaveUp, name);
      await expectQueueEmpties(name, undefined, `lock "${name}"`);
      await expectNextServed(name, undefined, (next) => next.acquire(name, { wait: NEXT_WAIT, ttl: 10_000 }), () => holder.release());
      const info = await locks().inspect(name);
      expect.soft(info.held, `lock "${name}" after everyone released: ${JSON.stringify(info)}`).toBe(false);
    };

    it('aborted right after the call: rejects with signal.reason at once; the release serves the real next waiter', async () => {
      fresh();
      const { holder, gaveUp } = await setUp('abort');
      const controller = new AbortController();
      const reason = new Error('caller gave up');
      const { ended } = ending(() => gaveUp.acquire('abort', { wait: 10_000, ttl: 10_000, signal: controller.signal }));
      controller.abort(reason);
      const { error, after } = await ended;
      await giveBack(error);
      expect(error).toBe(reason);
      expect.soft(after, 'ms until the aborted acquire rejected').toBeLessThan(ABORT_GRACE);
      await expectNothingLeft('abort', holder, gaveUp);
    });

    it('twenty callers aborted right after the call leave no queue entry, and the lock is free once released', async () => {
      fresh();
      const { holder, gaveUp } = await setUp('twenty');
      for (let i = 0; i < 20; i++) {
        const controller = new AbortController();
        const reason = new Error(`caller ${i} gave up`);
        const { ended } = ending(() => gaveUp.acquire('twenty', { wait: 10_000, ttl: 10_000, signal: controller.signal }));
        controller.abort(reason);
        const { error } = await ended;
        await giveBack(error);
        expect(error).toBe(reason);
      }
      await settled(gaveUp, 'twenty');
      await expectQueueEmpties('twenty', undefined, 'lock "twenty" after 20 aborted acquires');
      await holder.release();
      const info = await locks().inspect('twenty');
      expect.soft(info.held, `lock "twenty" after its holder released: ${JSON.stringify(info)}`).toBe(false);
    });

    itIf(can.stalls)(
      `whose wait (${SHORT_WAIT} ms) runs out while Redis is slow to answer: rejects in time with an UnreachableError (no reply); the release serves the real next waiter`,
      async () => {
        fresh();
        const { holder, gaveUp } = await setUp('slow');
        await stall(STALL);
        const { ended } = ending(() => gaveUp.acquire('slow', { wait: SHORT_WAIT, ttl: 10_000 }));
        const { error, after } = await ended;
        await giveBack(error);
        // No reply at all within the wait: Redis did not answer, which is what the caller is told (issue 18).
        expect(error).toBeInstanceOf(can.quorum ? QuorumError : UnreachableError);
        expect.soft(after, 'ms until the acquire that timed out rejected').toBeLessThan(SHORT_WAIT + GRACE);
        await expectNothingLeft('slow', holder, gaveUp);
      },
    );
  });

  // Registered only where semaphores exist: an empty describe fails in vitest.
  const describeIf = (capable: boolean) => (capable ? describe : (_name: string, _fn: () => void): void => undefined);

  describeIf(can.semaphores)('a caller of a semaphore, fair lock or read-write lock that gives up during an attempt leaves nothing behind', () => {
    for (const kind of PERMIT_KINDS) {
      const what = KIND_NAMES[kind];

      /**
       * `holding` holds the only permit of `name`; `gaveUp` waited for it once (queued, so its
       * inbox listens) and got it. Its next first attempt queues at once.
       */
      const setUp = async (name: string): Promise<{ holder: Lease; gaveUp: Locks }> => {
        const [holding, gaveUp] = [locks(), locks()];
        const first = await permitsOf(holding, kind, name)({ ttl: 10_000 });
        const waited = permitsOf(gaveUp, kind, name)({ wait: 5000 });
        await queued(name, kind, 1);
        await first.release();
        await (await waited).release();
        await settled(gaveUp, name); // what gaveUp sent and did not await has run: see the lock's setUp
        expect(await queueLength(name, kind), 'queue entries before the test').toBe(0);
        return { holder: await permitsOf(holding, kind, name)({ ttl: 10_000 }), gaveUp };
      };

      /** After the caller gave up: its queue entry goes, and the next waiter is served at once. */
      const expectNothingLeft = async (name: string, holder: Lease, gaveUp: Locks): Promise<void> => {
        await settled(gaveUp, name);
        await expectQueueEmpties(name, kind, `${what} "${name}"`);
        await expectNextServed(name, kind, (next) => permitsOf(next, kind, name)({ wait: NEXT_WAIT, ttl: 10_000 }), () => holder.release());
      };

      itIf(can.semaphores)(`${what}: aborted right after the call: rejects with signal.reason at once; the release wakes the real next waiter`, async () => {
        fresh();
        const { holder, gaveUp } = await setUp(`abort-${kind}`);
        const controller = new AbortController();
        const reason = new Error('caller gave up');
        const { ended } = ending(() => permitsOf(gaveUp, kind, `abort-${kind}`)({ wait: 10_000, ttl: 10_000, signal: controller.signal }));
        controller.abort(reason);
        const { error, after } = await ended;
        await giveBack(error);
        expect(error).toBe(reason);
        expect.soft(after, 'ms until the aborted acquire rejected').toBeLessThan(ABORT_GRACE);
        await expectNothingLeft(`abort-${kind}`, holder, gaveUp);
      });

      itIf(can.semaphores && can.stalls)(
        `${what}: aborted while Redis is slow to answer its first attempt: rejects with signal.reason at once, not when Redis answers`,
        async () => {
          fresh();
          const { holder, gaveUp } = await setUp(`abort-slow-${kind}`);
          await stall(STALL);
          const controller = new AbortController();
          const reason = new Error('caller gave up');
          const { ended } = ending(() => permitsOf(gaveUp, kind, `abort-slow-${kind}`)({ wait: 10_000, ttl: 10_000, signal: controller.signal }));
          controller.abort(reason);
          const { error, after } = await ended;
          await giveBack(error);
          expect(error).toBe(reason);
          expect.soft(after, `ms until the aborted acquire rejected (Redis held its attempt ${STALL} ms)`).toBeLessThan(ABORT_GRACE);
          await expectNothingLeft(`abort-slow-${kind}`, holder, gaveUp);
        },
      );

      itIf(can.semaphores && can.stalls)(
        `${what}: whose wait (${SHORT_WAIT} ms) runs out while Redis is slow to answer its first attempt: rejects in time with an UnreachableError (no reply); the release wakes the real next waiter`,
        async () => {
          fresh();
          const { holder, gaveUp } = await setUp(`slow-${kind}`);
          await stall(STALL);
          const { ended } = ending(() => permitsOf(gaveUp, kind, `slow-${kind}`)({ wait: SHORT_WAIT, ttl: 10_000 }));
          const { error, after } = await ended;
          await giveBack(error);
          expect(error).toBeInstanceOf(UnreachableError);
          expect.soft(after, 'ms until the acquire that timed out rejected').toBeLessThan(SHORT_WAIT + GRACE);
          await expectNothingLeft(`slow-${kind}`, holder, gaveUp);
        },
      );

      itIf(can.semaphores && can.stalls)(
        `${what}: whose wait runs out during a later attempt, the first that queues: rejects with a LockTimeoutError in time; the release wakes the real next waiter`,
        async () => {
          fresh();
          const name = `later-${kind}`;
          // A manager that never waited: its inbox opens during this wait, so its first attempt
          // does not queue, and the next one, sent once the inbox listens, is the first that does.
          const [holding, gaveUp] = [locks(), locks()];
          const holder = await permitsOf(holding, kind, name)({ ttl: 10_000 });
          // Long enough for the inbox to open on a loaded machine (its new connection, its ready
          // check, its subscription), so that a second attempt is made before the deadline.
          const wait = 800;
          const { ended } = ending(() => permitsOf(gaveUp, kind, name)({ wait, ttl: 10_000 }));
          // Behind the first attempt on gaveUp's own connection: that one is answered (busy, not
          // queued); the subscription passes; the attempt that queues is held past the deadline.
          await stall(2 * wait, gaveUp);
          const { error, after } = await ended;
          await giveBack(error);
          expect(error).toBeInstanceOf(LockTimeoutError);
          expect.soft(after, 'ms until the acquire that timed out rejected').toBeLessThan(wait + GRACE);
          expect.soft((error as LockTimeoutError).attempts, 'attempts of the acquire that timed out').toBeGreaterThanOrEqual(2);
          await expectNothingLeft(name, holder, gaveUp);
        },
      );
    }
  });

  describe('acquireAll', () => {
    it('rejects with signal.reason when the signal aborts as its last key is taken, and keeps no key', async () => {
      fresh();
      const controller = new AbortController();
      const reason = new Error('caller gave up as the last key came');
      // The abort comes from an `acquired` hook: synchronously when the last key's acquire
      // resolves, before acquireAll goes on (the hook runs in that acquire's own promise chain).
      const abortOnLastKey = (event: AcquiredEvent): void => {
        if (event.key === 'all-b') controller.abort(reason);
      };
      const [holding, caller] = [locks(), locks({ hooks: { acquired: abortOnLastKey } })];
      const holder = await holding.acquire('all-b', { ttl: 10_000 });
      const { ended } = ending(() => caller.acquireAll(['all-a', 'all-b'], { wait: 5000, ttl: 10_000, signal: controller.signal }));
      await queued('all-b', undefined, 1); // it holds all-a and waits for all-b
      await holder.release();
      const { error } = await ended;
      expect.soft(controller.signal.aborted, 'the signal aborted').toBe(true);
      expect.soft(error, 'what acquireAll gave a caller whose signal had aborted').toBe(reason);
      await giveBack(error);
      const look = locks();
      for (const key of ['all-a', 'all-b']) {
        const info = await look.inspect(key);
        expect.soft(info.held, `"${key}" after acquireAll rejected: ${JSON.stringify(info)}`).toBe(false);
      }
    });
  });
}
