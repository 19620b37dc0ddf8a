/**
 * The lock contract: every backend must pass these tests unchanged (memory, Redis via ioredis,
 * Redis via node-redis). Each test uses its own key prefix, so nothing is flushed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { once } from 'node:events';
import {
  ClosedError,
  InvalidOptionError,
  LeaseLostError,
  LeaseReleasedError,
  LockAbortedError,
  LockSuppressedError,
  LockTimeoutError,
  StaleFenceError,
  UnsupportedError,
  type Lease,
  type LockInfo,
  type Locks,
} from '../../src/index.js';
import { hostname } from 'node:os';
import type { SemaphoreKind } from '../../src/keys.js';
import { uniquePrefix, type BackendHarness } from '../helpers/harness.js';
import { ownTimersLeft } from '../helpers/own-timers.js';
import { timeoutHolderContract } from './timeout-holder-contract.js';

/** Resolves when `signal` aborts, with its reason. */
export async function aborted(signal: AbortSignal): Promise<unknown> {
  if (!signal.aborted) await once(signal, 'abort');
  return signal.reason;
}

const strategies = ['notify', 'backoff'] as const;

/** What a backend does beyond the common contract; tests of a capability run only where it exists. */
export interface Capabilities {
  /**
   * A release passes the lock on by itself: hands it to a waiter of the releasing process, or
   * grants it to a queued waiter of another. Redlock's releases only wake the next waiter, which
   * then asks the quorum (test/integration/redlock.test.ts covers what it does instead).
   */
  readonly handsOff: boolean;
  /** `fencedWrite`/`fencedRead` work (not over Redlock: a fenced resource lives on one Redis). */
  readonly fencedWrites: boolean;
  /** Counting semaphores work (not over Redlock: permits counted per node cannot be decided by a majority). */
  readonly semaphores: boolean;
  /**
   * `list` works. Not in compat mode: its lock keys are the legacy services' own keys, with no
   * latchkey prefix or hash tag to scan for, and `list` rejects with an UnsupportedError there
   * (test/integration/compat-timestamp.test.ts checks that).
   */
  readonly list?: boolean;
}

const FULL: Capabilities = { handsOff: true, fencedWrites: true, semaphores: true, list: true };

export function lockContract(makeHarness: () => Promise<BackendHarness>, can: Capabilities = FULL): void {
  // A test of a capability the backend lacks is not registered (not skipped): it does not apply.
  const itIf = (capable: boolean) => (capable ? it : (_name: string, _fn: () => Promise<void>): void => undefined);
  let h: BackendHarness;
  let prefix: string;
  const locks = (settings: Parameters<BackendHarness['locks']>[0] = {}): Locks => h.locks({ prefix, ...settings });

  beforeAll(async () => {
    h = await makeHarness();
  });
  afterAll(async () => {
    await h.close();
  });
  /**
   * Resolves once `count` waiters are queued for the lock in the backend. Polls: a waiter's
   * queueing happens inside the backend, and no event of the public API announces it.
   */
  const queued = async (name: string, count = 1): Promise<void> => {
    const end = performance.now() + 5000;
    while ((await h.queued(prefix, name)) < count) {
      if (performance.now() > end) throw new Error(`no ${count} waiter(s) queued for "${name}" within 5 s`);
      await new Promise((r) => setTimeout(r, 2));
    }
  };
  /** Resolves once a waiter is queued for the semaphore in the backend (polls, like `queued`). */
  const queuedFor = async (name: string, kind: SemaphoreKind = 'sem', count = 1): Promise<void> => {
    const end = performance.now() + 5000;
    while ((await h.semaphoreQueued(prefix, name, kind)) < count) {
      if (performance.now() > end) throw new Error(`no waiter queued for semaphore "${name}" within 5 s`);
      await new Promise((r) => setTimeout(r, 2));
    }
  };
  // A fresh prefix per test keeps tests apart without flushing anything.
  const fresh = (): void => {
    prefix = uniquePrefix();
  };

  describe('acquire and release', () => {
    it('hands out a lease with a 128-bit token, a fence and a validity on the monotonic clock', async () => {
      fresh();
      const l = locks();
      const before = performance.now();
      const lease = await l.acquire('orders:42', { ttl: 5000 });
      const after = performance.now();
      expect(lease.key).toBe('orders:42');
      expect(lease.token).toMatch(/^[0-9a-f]{40}$/); // the manager's tag (8 digits), then 128 random bits
      expect(Number.isSafeInteger(lease.fence) && lease.fence > 0).toBe(true);
      expect(lease.validUntil).toBeGreaterThan(before + 5000 - 60);
      expect(lease.validUntil).toBeLessThanOrEqual(after + 5000);
      expect(lease.held).toBe(true);
      expect(lease.signal.aborted).toBe(false);
      expect(JSON.stringify(lease)).not.toContain(lease.token);
      await lease.release();
      expect(lease.state).toBe('released');
      expect(await aborted(lease.signal)).toBeInstanceOf(LeaseReleasedError);
    });

    it('tryAcquire returns null while another lease holds the lock, and a lease once it is released', async () => {
      fresh();
      const [a, b] = [locks(), locks()];
      const first = await a.acquire('k');
      expect(await b.tryAcquire('k')).toBeNull();
      await first.release();
      const second = await b.tryAcquire('k');
      expect(second).not.toBeNull();
      expect(second!.fence).toBeGreaterThan(first.fence);
      expect(second!.token).not.toBe(first.token);
      await second!.release();
    });

    it('release is idempotent once it succeeded', async () => {
      fresh();
      const lease = await locks().acquire('k');
      await lease.release();
      await lease.release();
      expect(lease.state).toBe('released');
    });

    it('await using releases the lease at the end of the block', async () => {
      fresh();
      const l = locks();
      let inside: Lease | undefined;
      {
        await using held = await l.acquire('scoped');
        inside = held;
        expect(await l.tryAcquire('scoped')).toBeNull();
      }
      expect(inside.state).toBe('released');
      const again = await l.tryAcquire('scoped');
      expect(again).not.toBeNull();
      await again!.release();
    });

    it('locks with different names do not exclude each other', async () => {
      fresh();
      const l = locks();
      const [x, y] = await Promise.all([l.acquire('x'), l.acquire('y')]);
      await Promise.all([x.release(), y.release()]);
    });
  });

  describe('fencing tokens', () => {
    it('grow strictly with every acquisition of a key', async () => {
      fresh();
      const [a, b] = [locks(), locks()];
      let last = 0;
      for (let i = 0; i < 40; i++) {
        const lease = await (i % 2 ? a : b).acquire('fenced');
        expect(lease.fence).toBeGreaterThan(last);
        last = lease.fence;
        await lease.release();
      }
    });

    itIf(can.fencedWrites)('a fenced write accepts the current fence and refuses an older one', async () => {
      fresh();
      const l = locks();
      const resource = `${prefix}resource`;
      const old = await l.acquire('res', { ttl: 5000 });
      await l.fencedWrite(resource, 'from old', old);
      await old.release();
      const current = await l.acquire('res');
      await l.fencedWrite(resource, 'from current', current);
      await l.fencedWrite(resource, 'again from current', current.fence);
      const refused = l.fencedWrite(resource, 'late write from old', old);
      await expect(refused).rejects.toBeInstanceOf(StaleFenceError);
      await expect(refused).rejects.toMatchObject({ code: 'STALE_FENCE', fence: old.fence, highest: current.fence });
      expect(await l.fencedRead(resource)).toEqual({ value: 'again from current', fence: current.fence });
      expect(await l.fencedRead(`${prefix}never-written`)).toBeNull();
      await current.release();
    });
  });

  describe('mutual exclusion', () => {
    for (const strategy of strategies) {
      it(`never lets two holders in at once (${strategy}, 3 managers, 24 tasks)`, async () => {
        fresh();
        const managers = [locks({ strategy }), locks({ strategy }), locks({ strategy })];
        let counter = 0;
        let inside = 0;
        let maxInside = 0;
        const fences: number[] = [];
        await Promise.all(
          Array.from({ length: 24 }, (_, i) =>
            managers[i % 3]!.withLock('shared', { ttl: 5000, wait: 20_000 }, async (lease) => {
              inside++;
              maxInside = Math.max(maxInside, inside);
              fences.push(lease.fence);
              const read = counter;
              await new Promise((r) => setImmediate(r));
              counter = read + 1;
              inside--;
            }),
          ),
        );
        expect(maxInside).toBe(1);
        expect(counter).toBe(24);
        expect(fences).toEqual([...fences].sort((x, y) => x - y));
        expect(new Set(fences).size).toBe(24);
      });
    }
  });

  describe('waiting', () => {
    for (const strategy of strategies) {
      it(`a waiter gets the lock when the holder releases it (${strategy})`, async () => {
        fresh();
        const [a, b] = [locks({ strategy }), locks({ strategy })];
        const holder = await a.acquire('w', { ttl: 10_000 });
        const waiting = b.acquire('w', { wait: 10_000 });
        if (strategy === 'notify') await queued('w'); // it failed once and waits (backoff leaves no trace)
        await holder.release();
        const next = await waiting;
        expect(next.fence).toBeGreaterThan(holder.fence);
        await next.release();
      });

      it(`a caller of the same manager gets the lock when its holder's TTL runs out without a release (${strategy})`, async () => {
        fresh();
        const l = locks({ strategy });
        const holder = await l.acquire('forgotten', { ttl: 200 }); // never released, its signal never asked for
        const next = await l.acquire('forgotten', { wait: 5000 });
        expect(holder.state).toBe('lost');
        expect(holder.lostError?.reason).toBe('expired');
        expect(next.fence).toBeGreaterThan(holder.fence);
        await next.release();
        // A lease nobody watches is seen to be lost when it is next looked at.
        const unwatched = await l.acquire('unwatched', { ttl: 50 });
        await new Promise((r) => setTimeout(r, 60)); // let its validity run out
        expect(unwatched.held).toBe(false);
        expect(unwatched.state).toBe('lost');
        expect(await l.tryAcquire('unwatched')).not.toBeNull();
      });

      it(`a waiter gets the lock when the holder's TTL runs out without a release (${strategy})`, async () => {
        fresh();
        const [a, b] = [locks({ strategy }), locks({ strategy })];
        const holder = await a.acquire('crashed', { ttl: 200 });
        const started = performance.now();
        const next = await b.acquire('crashed', { wait: 5000 });
        // Never before the holder's TTL, and soon after it even though nobody published a release.
        expect(performance.now() - started).toBeLessThan(200 + 500);
        expect(next.fence).toBeGreaterThan(holder.fence);
        await next.release();
        await expect(holder.release()).rejects.toBeInstanceOf(LeaseLostError);
      });

      it(`rejects with a LockTimeoutError when the wait runs out (${strategy})`, async () => {
        fresh();
        const [a, b] = [locks({ strategy }), locks({ strategy })];
        const holder = await a.acquire('busy', { ttl: 10_000 });
        const started = performance.now();
        const error = await b.acquire('busy', { wait: 150 }).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(LockTimeoutError);
        expect(error).toMatchObject({ code: 'LOCK_TIMEOUT', key: 'busy' });
        expect(performance.now() - started).toBeGreaterThanOrEqual(149);
        // backoff retries every few ms; notify tries again once listening, which a loaded Cluster may not reach in 150 ms
        expect((error as LockTimeoutError).attempts).toBeGreaterThanOrEqual(strategy === 'backoff' ? 2 : 1);
        await holder.release();
      });

      it(`rejects with signal.reason when aborted, and leaves no timer behind (${strategy})`, async () => {
        fresh();
        const [a, b] = [locks({ strategy }), locks({ strategy })];
        const holder = await a.acquire('abort', { ttl: 10_000 });
        const controller = new AbortController();
        const reason = new Error('caller gave up');
        const left = await ownTimersLeft(async () => {
          const waiting = b.acquire('abort', { wait: 60_000, signal: controller.signal });
          setTimeout(() => controller.abort(reason), 50);
          await expect(waiting).rejects.toBe(reason);
        });
        expect(left).toEqual([]);
        await holder.release();
        await expect(b.acquire('abort', { signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
      });
    }

    it('wait: 0 tries once and times out at once', async () => {
      fresh();
      const [a, b] = [locks(), locks()];
      const holder = await a.acquire('once');
      await expect(b.acquire('once', { wait: 0 })).rejects.toMatchObject({ code: 'LOCK_TIMEOUT', attempts: 1 });
      await holder.release();
    });
  });

  timeoutHolderContract({ locks, fresh });

  describe('a lease that expires or is taken', () => {
    it('signals loss when its validity runs out, and its release then reports it', async () => {
      fresh();
      const lease = await locks().acquire('short', { ttl: 60 });
      const reason = await aborted(lease.signal);
      expect(reason).toBeInstanceOf(LeaseLostError);
      expect(reason).toMatchObject({ code: 'LEASE_LOST', reason: 'expired', key: 'short' });
      expect(lease.held).toBe(false);
      await expect(lease.release()).rejects.toBeInstanceOf(LeaseLostError);
    });

    it("a holder whose lease expired cannot release the new holder's lock", async () => {
      fresh();
      const [a, b, c] = [locks(), locks(), locks()];
      const stale = await a.acquire('taken', { ttl: 50 });
      await aborted(stale.signal);
      const fresh2 = await b.acquire('taken', { ttl: 10_000, wait: 2000 });
      const error = await stale.release().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LeaseLostError);
      expect(await c.tryAcquire('taken')).toBeNull(); // the new holder still holds it
      expect(fresh2.held).toBe(true);
      await fresh2.release();
    });

    it('release reports a lease whose key was deleted behind its back, and aborts its signal', async () => {
      fresh();
      const lease = await locks().acquire('deleted', { ttl: 10_000 });
      await h.forceDelete(prefix, 'deleted');
      const error = await lease.release().catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'LEASE_LOST', reason: 'gone' });
      expect(lease.signal.reason).toBe(error);
      expect(lease.state).toBe('lost');
    });

    it('release by a stale holder whose key was taken reports "taken" and leaves the new holder alone', async () => {
      fresh();
      const [a, b, c] = [locks(), locks(), locks()];
      const stale = await a.acquire('t2', { ttl: 10_000 });
      await h.forceDelete(prefix, 't2');
      const current = await b.acquire('t2');
      await expect(stale.release()).rejects.toMatchObject({ code: 'LEASE_LOST', reason: 'taken' });
      expect(await c.tryAcquire('t2')).toBeNull();
      await current.release();
    });
  });

  describe('extend', () => {
    it('keeps the lease past its first TTL and moves its validity', async () => {
      fresh();
      const [a, b] = [locks(), locks()];
      const lease = await a.acquire('ext', { ttl: 150 });
      const firstValidUntil = lease.validUntil;
      await new Promise((r) => setTimeout(r, 80));
      await lease.extend(300);
      expect(lease.validUntil).toBeGreaterThan(firstValidUntil);
      await new Promise((r) => setTimeout(r, 120)); // past the first TTL
      expect(lease.held).toBe(true);
      expect(await b.tryAcquire('ext')).toBeNull();
      await lease.release();
    });

    it('never recreates a lock that is gone', async () => {
      fresh();
      const [a, b] = [locks(), locks()];
      const lease = await a.acquire('gone', { ttl: 10_000 });
      await h.forceDelete(prefix, 'gone');
      await expect(lease.extend()).rejects.toMatchObject({ code: 'LEASE_LOST', reason: 'gone' });
      expect(lease.signal.aborted).toBe(true);
      const other = await b.tryAcquire('gone');
      expect(other).not.toBeNull(); // free: extend did not put it back
      await other!.release();
    });

    it('fails on a lease whose validity ran out', async () => {
      fresh();
      const lease = await locks().acquire('late', { ttl: 40 });
      await aborted(lease.signal);
      await expect(lease.extend()).rejects.toMatchObject({ code: 'LEASE_LOST' });
    });
  });

  describe('withLock and the watchdog', () => {
    it('returns the callback result and releases the lock', async () => {
      fresh();
      const l = locks();
      let seen: Lease | undefined;
      const result = await l.withLock('scoped', async (lease) => {
        seen = lease;
        return 42;
      });
      expect(result).toBe(42);
      expect(seen!.state).toBe('released');
    });

    it('releases the lock when the callback throws, and rethrows its error', async () => {
      fresh();
      const l = locks();
      const failure = new Error('boom');
      let seen: Lease | undefined;
      await expect(
        l.withLock('throws', { ttl: 5000 }, (lease) => {
          seen = lease;
          throw failure;
        }),
      ).rejects.toBe(failure);
      expect(seen!.state).toBe('released');
      const again = await l.tryAcquire('throws');
      expect(again).not.toBeNull();
      await again!.release();
    });

    it('renews the lease across several TTLs while the callback runs', async () => {
      fresh();
      const [a, b] = [locks(), locks()];
      // A TTL well above a loaded machine's timer delays; held across 3 of them.
      await a.withLock('long', { ttl: 300 }, async (lease) => {
        for (let i = 0; i < 5; i++) {
          await new Promise((r) => setTimeout(r, 200));
          expect(lease.held).toBe(true);
        }
        expect(await b.tryAcquire('long')).toBeNull();
      });
    });

    it('aborts the signal with a LeaseLostError when the key is deleted behind its back, and withLock rejects', async () => {
      fresh();
      const l = locks();
      const result = l.withLock('watched', { ttl: 300 }, async (lease) => {
        await h.forceDelete(prefix, 'watched');
        const reason = await aborted(lease.signal);
        expect(reason).toMatchObject({ code: 'LEASE_LOST', reason: 'gone' });
        return 'finished anyway';
      });
      await expect(result).rejects.toBeInstanceOf(LeaseLostError);
    });

    it('reports both errors when the callback throws and the lease was lost', async () => {
      fresh();
      const l = locks();
      const failure = new Error('work failed');
      const error = await l
        .withLock('both', { ttl: 5000, renew: false }, async () => {
          await h.forceDelete(prefix, 'both');
          throw failure;
        })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LockSuppressedError);
      expect(error).toMatchObject({ code: 'SUPPRESSED' });
      expect((error as LockSuppressedError).suppressed).toBe(failure);
      expect((error as LockSuppressedError).error).toBeInstanceOf(LeaseLostError);
    });

    it('renews leases due together each with its own outcome: one whose key is deleted is lost alone, the others stay held', async () => {
      fresh();
      const [a, b] = [locks(), locks()];
      const names = ['r1', 'r2', 'r3', 'r4'];
      // Same schedule: renewed together where the backend batches (one call), one by one elsewhere.
      const leases = await Promise.all(names.map((name) => a.acquire(name, { ttl: 300, renew: { every: 50 } })));
      await h.forceDelete(prefix, 'r2');
      expect(await aborted(leases[1]!.signal)).toMatchObject({ code: 'LEASE_LOST', reason: 'gone', key: 'r2' });
      // The others, renewed in the same batches, are held across two more TTLs.
      await new Promise((r) => setTimeout(r, 700));
      for (const i of [0, 2, 3]) {
        expect(leases[i]!.held).toBe(true);
        expect(await b.tryAcquire(names[i]!)).toBeNull();
      }
      await Promise.all([0, 2, 3].map((i) => leases[i]!.release()));
    });

    it('stops renewing when maxHold is reached, and the lease then expires', async () => {
      fresh();
      // TTL and cap well above a loaded machine's timer delays (a renewal every TTL/3 = 100 ms).
      const lease = await locks().acquire('capped', { ttl: 300, renew: { maxHold: 600 } });
      const started = performance.now();
      const reason = await aborted(lease.signal);
      expect(reason).toMatchObject({ reason: 'expired' });
      // Renewed past its first TTL, and not past the cap plus one TTL.
      expect(performance.now() - started).toBeGreaterThan(300);
      expect(performance.now() - started).toBeLessThan(600 + 300 + 500);
    });
  });

  describe('the in-process queue', () => {
    it('a lease handed to a caller while others wait behind it passes the lock on when its TTL runs out', async () => {
      fresh();
      const l = locks();
      const first = await l.acquire('chain', { ttl: 10_000 });
      const forgetful = l.acquire('chain', { ttl: 200 }); // will never release
      const patient = l.acquire('chain', { wait: 5000 });
      await first.release();
      const second = await forgetful;
      const third = await patient; // when the second lease's validity runs out, not at `wait`
      expect(second.state).toBe('lost');
      expect(third.fence).toBeGreaterThan(second.fence);
      await third.release();
    });

    it('a wait longer than a Node.js timer can hold (2^31 ms) still waits', async () => {
      fresh();
      const l = locks();
      const holder = await l.acquire('long', { ttl: 10_000 });
      const waiting = l.acquire('long', { wait: 2 ** 32 });
      await new Promise((r) => setTimeout(r, 20)); // it would have timed out by now if the timer overflowed
      await holder.release();
      await (await waiting).release();
    });

    it('serves callers of one manager in arrival order, handing the lock on with a new token and fence', async () => {
      fresh();
      const l = locks();
      const first = await l.acquire('fifo', { ttl: 10_000 });
      const order: number[] = [];
      const leases: Lease[] = [];
      const waiting = Array.from({ length: 10 }, (_, i) =>
        l.acquire('fifo', { ttl: 10_000 }).then(async (lease) => {
          order.push(i);
          leases.push(lease);
          await lease.release();
        }),
      );
      await first.release();
      await Promise.all(waiting);
      expect(order).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
      const fences = [first, ...leases].map((x) => x.fence);
      expect(fences).toEqual([...fences].sort((x, y) => x - y));
      expect(new Set([first, ...leases].map((x) => x.token)).size).toBe(11);
    });

    itIf(can.handsOff)('gives another process a turn after `localHandoffs` hand-offs in a row', async () => {
      fresh();
      const busy = locks({ localHandoffs: 3 });
      const other = locks();
      const first = await busy.acquire('turns', { ttl: 10_000 });
      let busyServed = 0;
      let servedBeforeOther = -1;
      const loops = Array.from({ length: 6 }, () =>
        (async () => {
          for (let i = 0; i < 4; i++) {
            const lease = await busy.acquire('turns', { ttl: 10_000, wait: 20_000 });
            busyServed++;
            await new Promise((r) => setImmediate(r));
            await lease.release();
          }
        })(),
      );
      const otherTurn = (async () => {
        const lease = await other.acquire('turns', { ttl: 10_000, wait: 20_000 });
        servedBeforeOther = busyServed;
        await lease.release();
      })();
      await queued('turns'); // the other manager's waiter (the busy manager's wait in memory behind its own lease)
      await first.release();
      await Promise.all([...loops, otherTurn]);
      expect(busyServed).toBe(24);
      expect(servedBeforeOther).toBeGreaterThanOrEqual(0);
      expect(servedBeforeOther).toBeLessThanOrEqual(3 + 1);
    });

    it('a queued caller that times out or is aborted leaves the queue, and the next is still served', async () => {
      fresh();
      const l = locks();
      const holder = await l.acquire('leave', { ttl: 10_000 });
      const controller = new AbortController();
      const aborted = l.acquire('leave', { signal: controller.signal }).catch((e: unknown) => e);
      const timedOut = l.acquire('leave', { wait: 30 }).catch((e: unknown) => e);
      const served = l.acquire('leave', { wait: 10_000 });
      controller.abort(new Error('no longer needed'));
      expect(await aborted).toMatchObject({ message: 'no longer needed' });
      expect(await timedOut).toBeInstanceOf(LockTimeoutError);
      await holder.release();
      const lease = await served;
      expect(lease.fence).toBeGreaterThan(holder.fence);
      await lease.release();
    });

    it('tryAcquire does not jump the queue of waiting callers', async () => {
      fresh();
      const l = locks();
      const holder = await l.acquire('nojump', { ttl: 10_000 });
      const waiting = l.acquire('nojump');
      expect(await l.tryAcquire('nojump')).toBeNull();
      await holder.release();
      await (await waiting).release();
    });

    it('a waiter in another manager is granted the lock (or woken) by the release itself', async () => {
      fresh();
      const [a, b] = [locks(), locks({ recheck: 60_000 })];
      const holder = await a.acquire('pass', { ttl: 60_000 });
      const waiting = b.acquire('pass', { wait: 10_000 });
      await queued('pass');
      const released = performance.now();
      await holder.release();
      const lease = await waiting;
      // Told by the release itself: not the 60 s recheck, nor the 60 s TTL.
      expect(performance.now() - released).toBeLessThan(1000);
      await lease.release();
    });

    itIf(can.handsOff)('the releasing process cannot barge in ahead of a waiter of another process', async () => {
      fresh();
      const [a, b] = [locks(), locks()];
      const holder = await a.acquire('barge', { ttl: 60_000 });
      const waiting = b.acquire('barge', { wait: 10_000 });
      await queued('barge');
      await holder.release();
      expect(await a.tryAcquire('barge')).toBeNull();
      await (await waiting).release();
    });
  });

  describe('inspect, list and forceRelease', () => {
    /** Resolves once the lock's holder is recorded (the record is written after the acquire, unawaited). */
    const recorded = async (l: Locks, name: string): Promise<LockInfo> => {
      const end = performance.now() + 5000;
      for (;;) {
        const info = await l.inspect(name);
        if (info.holder || performance.now() > end) return info;
        await new Promise((r) => setTimeout(r, 2));
      }
    };

    it('inspect shows a held lock with its TTL, fence, queued waiters and recorded holder, and a free one as free', async () => {
      fresh();
      const [a, b] = [locks({ holder: 'worker-7 pid 42' }), locks()];
      expect(await a.inspect('inspected')).toEqual({ name: 'inspected', held: false, ttl: 0, fence: null, queued: 0, holder: null });
      const before = Date.now();
      const lease = await a.acquire('inspected', { ttl: 10_000 });
      const info = await recorded(b, 'inspected');
      expect(info).toMatchObject({ name: 'inspected', held: true, queued: 0 });
      // Over Redlock, a node outside the majority may have counted higher than the lease's fence.
      expect(info.fence).toBeGreaterThanOrEqual(lease.fence);
      expect(info.ttl).toBeGreaterThan(5000);
      expect(info.ttl).toBeLessThanOrEqual(10_000);
      expect(info.holder?.who).toBe('worker-7 pid 42');
      // Where the store can tell (not Redlock), since when: from the fence, the server's clock.
      if (info.holder!.since !== null) expect(Math.abs(info.holder!.since - before)).toBeLessThan(5000);
      expect(JSON.stringify(info)).not.toContain(lease.token);
      const waiting = b.acquire('inspected', { wait: 30_000 });
      await queued('inspected');
      expect((await b.inspect('inspected')).queued).toBeGreaterThanOrEqual(1);
      await lease.release();
      const next = await waiting;
      // The new holder is b, under its default description: host and pid.
      expect((await b.inspect('inspected')).holder?.who).toBe(`${hostname()} pid ${process.pid}`);
      await next.release();
      expect((await b.inspect('inspected')).held).toBe(false);
    });

    it('holder: true records the host and pid; a bad holder option is refused', async () => {
      fresh();
      const l = locks({ holder: true });
      const lease = await l.acquire('who');
      expect((await recorded(l, 'who')).holder?.who).toBe(`${hostname()} pid ${process.pid}`);
      await lease.release();
      expect(() => locks({ holder: '' })).toThrow(InvalidOptionError);
      expect(() => locks({ holder: 'x'.repeat(201) })).toThrow(/at most 200 characters/);
    });

    itIf(can.list !== false)('list shows the held locks that match a pattern, sorted, and not the free ones', async () => {
      fresh();
      const l = locks();
      const held = await Promise.all(['jobs:b', 'jobs:a', 'other'].map((name) => l.acquire(name)));
      await (await l.acquire('jobs:released')).release();
      expect((await l.list()).map((i) => i.name)).toEqual(['jobs:a', 'jobs:b', 'other']);
      expect((await l.list('jobs:*')).map((i) => i.name)).toEqual(['jobs:a', 'jobs:b']);
      expect((await l.list('jobs:*')).every((i) => i.held && i.ttl > 0)).toBe(true);
      await expect(l.list('')).rejects.toBeInstanceOf(InvalidOptionError);
      await Promise.all(held.map((lease) => lease.release()));
      expect(await l.list()).toEqual([]);
    });

    it('forceRelease ends the holder\'s lease, says whose it was, and passes the lock to a waiter', async () => {
      fresh();
      const [a, b, op] = [locks({ holder: 'stuck-job' }), locks(), locks()];
      const lease = await a.acquire('stuck', { ttl: 60_000, renew: true });
      await recorded(op, 'stuck');
      const waiting = b.acquire('stuck', { wait: 30_000 });
      await queued('stuck');
      const broken = await op.forceRelease('stuck');
      expect(broken).toMatchObject({ name: 'stuck', held: true, holder: { who: 'stuck-job' } });
      const next = await waiting;
      expect(next.fence).toBeGreaterThan(lease.fence);
      // The old holder's watchdog finds the lock taken: its signal reports the loss.
      lease.extend().catch(() => {});
      expect(await aborted(lease.signal)).toBeInstanceOf(LeaseLostError);
      await next.release();
      expect(await op.forceRelease('stuck')).toBeNull();
    });
  });

  describe('semaphore', () => {
    itIf(can.semaphores)('never lets more than `limit` permits be held at once, across managers, and reaches the limit', async () => {
      fresh();
      const managers = [locks(), locks(), locks()];
      const limit = 3;
      let inside = 0;
      let most = 0;
      let served = 0;
      await Promise.all(
        Array.from({ length: 12 }, async (_, i) => {
          const sem = managers[i % managers.length]!.semaphore('pool', { limit });
          for (let round = 0; round < 3; round++) {
            await sem.withPermit({ wait: 20_000 }, async () => {
              inside++;
              most = Math.max(most, inside);
              expect(inside).toBeLessThanOrEqual(limit);
              await new Promise((r) => setTimeout(r, 2));
              inside--;
              served++;
            });
          }
        }),
      );
      expect(served).toBe(36);
      expect(most).toBe(limit);
    });

    itIf(can.semaphores)('takes several permits at once, all or none, and each permit lease has its own fence', async () => {
      fresh();
      const sem = locks().semaphore('multi', { limit: 3 });
      const two = await sem.acquire({ permits: 2 });
      expect(await sem.tryAcquire({ permits: 2 })).toBeNull();
      const one = await sem.tryAcquire();
      expect(one).not.toBeNull();
      expect(one!.fence).toBeGreaterThan(two.fence);
      expect(await sem.tryAcquire()).toBeNull();
      await two.release();
      const again = await sem.tryAcquire({ permits: 2 });
      expect(again).not.toBeNull();
      await Promise.all([one!.release(), again!.release()]);
      await expect(sem.acquire({ permits: 4 })).rejects.toThrow(InvalidOptionError);
      expect(() => locks().semaphore('bad', { limit: 0 })).toThrow(InvalidOptionError);
    });

    itIf(can.semaphores)('a release wakes a waiter of another manager (not its re-check), first come, first served', async () => {
      fresh();
      // A re-check far beyond the wait: only the release's wake-up can serve the waiters in time.
      const [a, b, c] = [locks({ recheck: 60_000 }), locks({ recheck: 60_000 }), locks({ recheck: 60_000 })];
      const holding = await a.semaphore('fifo', { limit: 2 }).acquire({ ttl: 60_000 });
      // b needs both permits: it waits, and holds c back although one permit is free.
      const big = b.semaphore('fifo', { limit: 2 }).acquire({ permits: 2, wait: 10_000, ttl: 60_000 });
      await queuedFor('fifo');
      expect(await c.semaphore('fifo', { limit: 2 }).tryAcquire()).toBeNull();
      const small = c.semaphore('fifo', { limit: 2 }).acquire({ wait: 10_000, ttl: 60_000 });
      await holding.release();
      const both = await big;
      await both.release();
      await (await small).release();
    });

    itIf(can.semaphores)('the permits of a holder that never releases come back when its TTL runs out', async () => {
      fresh();
      const sem = locks().semaphore('crashed', { limit: 1 });
      const lost = await sem.acquire({ ttl: 300 }); // never released: as if its process died
      const next = await locks().semaphore('crashed', { limit: 1 }).acquire({ wait: 5000 });
      expect(next.fence).toBeGreaterThan(lost.fence);
      await next.release();
      await expect(lost.release()).rejects.toBeInstanceOf(LeaseLostError);
    });

    itIf(can.semaphores)('a waiter that times out or is aborted leaves the queue and does not hold back the next', async () => {
      fresh();
      const [a, b, c] = [locks(), locks(), locks()];
      const holding = await a.semaphore('leaving', { limit: 2 }).acquire({ ttl: 60_000 });
      const greedy = b.semaphore('leaving', { limit: 2 }).acquire({ permits: 2, wait: 200 }).catch((e: unknown) => e);
      expect(await greedy).toBeInstanceOf(LockTimeoutError);
      const controller = new AbortController();
      const aborted2 = b.semaphore('leaving', { limit: 2 }).acquire({ permits: 2, wait: 60_000, signal: controller.signal }).catch((e: unknown) => e);
      await queuedFor('leaving');
      controller.abort(new Error('changed my mind'));
      expect(await aborted2).toMatchObject({ message: 'changed my mind' });
      // An abort while the first attempt is still in flight ends the wait too.
      const early = new AbortController();
      const atOnce = b.semaphore('leaving', { limit: 2 }).acquire({ permits: 2, wait: 60_000, signal: early.signal });
      early.abort(new Error('at once'));
      await expect(atOnce).rejects.toThrow('at once');
      // None left an entry that holds c back from the free permit.
      const one = await c.semaphore('leaving', { limit: 2 }).acquire({ wait: 5000 });
      await Promise.all([one.release(), holding.release()]);
    });

    itIf(can.semaphores)('withPermit renews the permit across several TTLs and releases it', async () => {
      fresh();
      const sem = locks().semaphore('renewed', { limit: 1, ttl: 150 });
      const result = await sem.withPermit(async (lease) => {
        await new Promise((r) => setTimeout(r, 500));
        expect(lease.held).toBe(true);
        return 'done';
      });
      expect(result).toBe('done');
      expect(await sem.tryAcquire()).not.toBeNull();
    });

    itIf(can.semaphores)('a read-write lock lets readers in together and a writer alone', async () => {
      fresh();
      const [a, b] = [locks(), locks()];
      const rwA = a.readWriteLock('doc');
      const rwB = b.readWriteLock('doc');
      const r1 = await rwA.read();
      const r2 = await rwB.tryRead();
      expect(r2).not.toBeNull();
      expect(await rwB.tryWrite()).toBeNull();
      await Promise.all([r1.release(), r2!.release()]);
      const w = await rwB.tryWrite();
      expect(w).not.toBeNull();
      expect(await rwA.tryRead()).toBeNull();
      expect(await rwA.tryWrite()).toBeNull();
      await w!.release();
      expect(await rwA.withRead(() => 'read')).toBe('read');
      expect(await rwA.withWrite(async (lease) => lease.held)).toBe(true);
    });

    itIf(can.semaphores)('a waiting writer is not starved by readers that come after it (FIFO, readers batched)', async () => {
      fresh();
      const [a, b, c] = [locks(), locks(), locks()];
      const order: string[] = [];
      const first = await a.readWriteLock('feed').read({ ttl: 60_000 });
      const writer = b
        .readWriteLock('feed')
        .write({ wait: 10_000, ttl: 60_000 })
        .then((lease) => (order.push('writer'), lease));
      await queuedFor('feed', 'rw');
      // A reader that comes after the writer does not join the reader still holding the lock.
      expect(await c.readWriteLock('feed').tryRead()).toBeNull();
      const late = [1, 2].map(() =>
        c
          .readWriteLock('feed')
          .read({ wait: 10_000, ttl: 60_000 })
          .then((lease) => (order.push('reader'), lease)),
      );
      await first.release();
      const w = await writer;
      expect(order).toEqual(['writer']);
      await w.release();
      const readers = await Promise.all(late);
      expect(order).toEqual(['writer', 'reader', 'reader']);
      await Promise.all(readers.map((r) => r.release()));
    });

    itIf(can.semaphores)('a fair lock serves waiters of every manager in arrival order, and nobody barges in', async () => {
      fresh();
      const managers = [locks(), locks(), locks(), locks()];
      const fair = managers.map((l) => l.fairLock('turns', { ttl: 60_000, wait: 10_000 }));
      const order: number[] = [];
      const first = await fair[0]!.acquire();
      const waiting: Array<Promise<Lease>> = [];
      for (const i of [1, 2, 3]) {
        waiting.push(fair[i]!.acquire().then((lease) => (order.push(i), lease)));
        await queuedFor('turns', 'fair', i); // arrival order is the order of joining the queue
      }
      // Free a moment later, but waiters are queued: a newcomer does not jump in.
      await first.release();
      expect(await fair[0]!.tryAcquire()).toBeNull();
      for (const p of waiting) await (await p).release();
      expect(order).toEqual([1, 2, 3]);
    });

    itIf(can.semaphores)('a fair lock whose holder never releases goes to the first waiter at its TTL, not to a newcomer', async () => {
      fresh();
      const [a, b, c] = [locks(), locks(), locks()];
      await a.fairLock('expiring').acquire({ ttl: 300 }); // never released: as if its process died
      let served = false;
      const queued = b
        .fairLock('expiring')
        .acquire({ wait: 5000 })
        .then((lease) => ((served = true), lease));
      await queuedFor('expiring', 'fair');
      // A newcomer tries all along, through the moment the TTL runs out: it never gets in first.
      let barged = 0;
      while (!served) {
        const lease = await c.fairLock('expiring').tryAcquire();
        if (lease) {
          barged++;
          await lease.release();
        }
        await new Promise((r) => setImmediate(r)); // the in-memory store answers in microtasks: let timers run
      }
      expect(barged).toBe(0);
      await (await queued).release();
      const next = await c.fairLock('expiring').tryAcquire();
      expect(next).not.toBeNull();
      await next!.release();
    });

    itIf(!can.semaphores)('is refused with an UnsupportedError where permits cannot be counted', async () => {
      fresh();
      expect(() => locks().semaphore('nope', { limit: 2 })).toThrow(UnsupportedError);
      expect(() => locks().readWriteLock('nope')).toThrow(UnsupportedError);
      expect(() => locks().fairLock('nope')).toThrow(UnsupportedError);
    });
  });

  describe('multi-lock (acquireAll, tryAcquireAll, withLocks)', () => {
    /** Whether `name` is held now, by anyone (a fresh manager tries it and gives it back). */
    const heldNow = async (name: string): Promise<boolean> => (await locks().inspect(name)).held;

    it('takes every key at once, with a fence per key, in the global order; release frees them all', async () => {
      fresh();
      const l = locks();
      const all = await l.acquireAll(['stock:7', 'orders:42', 'audit'], { ttl: 5000 });
      expect(all.keys).toEqual(['audit', 'orders:42', 'stock:7']);
      expect(all.leases.map((p) => p.key)).toEqual(all.keys);
      for (const key of all.keys) expect(Number.isSafeInteger(all.fence(key)) && all.fence(key) > 0).toBe(true);
      expect(() => all.fence('other')).toThrow(InvalidOptionError);
      expect(all.held).toBe(true);
      expect(all.validUntil).toBe(Math.min(...all.leases.map((p) => p.validUntil)));
      expect(JSON.stringify(all)).not.toContain(all.leases[0]!.token);
      expect(await locks().tryAcquire('orders:42')).toBeNull();
      await all.release();
      await all.release(); // idempotent
      expect(all.state).toBe('released');
      expect(await aborted(all.signal)).toBeInstanceOf(LeaseReleasedError);
      for (const key of all.keys) expect(await heldNow(key)).toBe(false);
      // A later holder of any of the keys gets a higher fence.
      const again = await l.acquireAll(['audit', 'stock:7']);
      expect(again.fence('audit')).toBeGreaterThan(all.fence('audit'));
      await again.release();
    });

    it('all or nothing: with one key held elsewhere, tryAcquireAll returns null and leaves none of the others held', async () => {
      fresh();
      const [a, b] = [locks(), locks()];
      const holder = await b.acquire('m');
      expect(await a.tryAcquireAll(['a', 'm', 'z'])).toBeNull();
      expect(await a.tryAcquireAll(['m', 'a'])).toBeNull();
      expect(await heldNow('a')).toBe(false);
      expect(await heldNow('z')).toBe(false);
      await holder.release();
      const all = await a.tryAcquireAll(['a', 'm', 'z']);
      expect(all?.keys).toEqual(['a', 'm', 'z']);
      await all!.release();
    });

    it('rolls back on a timeout: the keys taken before the busy one are released', async () => {
      fresh();
      const [a, b] = [locks(), locks()];
      const holder = await b.acquire('k2', { ttl: 10_000 });
      const error = await a.acquireAll(['k1', 'k2', 'k3'], { wait: 150 }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LockTimeoutError);
      expect(error).toMatchObject({ key: 'k2' });
      expect(await heldNow('k1')).toBe(false);
      expect(await heldNow('k3')).toBe(false);
      await holder.release();
    });

    it('rolls back on an abort, and rejects with signal.reason', async () => {
      fresh();
      const [a, b] = [locks(), locks()];
      const holder = await b.acquire('y', { ttl: 10_000 });
      const controller = new AbortController();
      const reason = new Error('caller gave up');
      const waiting = a.acquireAll(['x', 'y'], { wait: 60_000, signal: controller.signal });
      setTimeout(() => controller.abort(reason), 50);
      await expect(waiting).rejects.toBe(reason);
      expect(await heldNow('x')).toBe(false);
      await holder.release();
      await expect(a.acquireAll(['x', 'y'], { signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
    });

    it('waits for a busy key and gets them all once it is released', async () => {
      fresh();
      const [a, b] = [locks(), locks()];
      const holder = await b.acquire('w2', { ttl: 10_000 });
      const waiting = a.acquireAll(['w1', 'w2'], { wait: 10_000 });
      await new Promise((r) => setTimeout(r, 50));
      await holder.release();
      const all = await waiting;
      expect(all.fence('w2')).toBeGreaterThan(holder.fence);
      await all.release();
    });

    it('extends parts that ran short while a later key was waited for, and starts over when one was lost meanwhile', async () => {
      fresh();
      const [a, b, c] = [locks(), locks(), locks()];
      // e1 is taken at once, e2 only 250 ms later: e1 has about 50 ms left, so it is extended.
      let holder = await b.acquire('e2', { ttl: 10_000 });
      setTimeout(() => void holder.release(), 250);
      const extended = await a.acquireAll(['e1', 'e2'], { ttl: 300, wait: 5000 });
      expect(extended.timeLeft()).toBeGreaterThan(150);
      await extended.release();
      // e1's part expires during the wait and c takes it: a gives e2 back and starts over.
      holder = await b.acquire('e2', { ttl: 10_000 });
      const waiting = a.acquireAll(['e1', 'e2'], { ttl: 100, wait: 5000 });
      await new Promise((r) => setTimeout(r, 150));
      const taker = await c.acquire('e1', { ttl: 10_000, wait: 1000 });
      await holder.release();
      setTimeout(() => void taker.release(), 100);
      const all = await waiting;
      expect(all.held).toBe(true);
      expect(all.fence('e1')).toBeGreaterThan(taker.fence);
      await all.release();
    });

    it('callers with overlapping sets in opposite orders never deadlock, and never hold a key at once', async () => {
      fresh();
      const managers = [locks(), locks()];
      const sets = [['p', 'q', 'r'], ['r', 'q'], ['q', 'p'], ['r', 'p']];
      const inside = new Map<string, number>();
      let most = 0;
      let done = 0;
      await Promise.all(
        Array.from({ length: 16 }, (_, i) =>
          managers[i % 2]!.withLocks(sets[i % sets.length]!, { ttl: 5000, wait: 20_000 }, async (all) => {
            for (const key of all.keys) {
              inside.set(key, (inside.get(key) ?? 0) + 1);
              most = Math.max(most, inside.get(key)!);
            }
            await new Promise((r) => setTimeout(r, 2));
            for (const key of all.keys) inside.set(key, inside.get(key)! - 1);
            done++;
          }),
        ),
      );
      expect(done).toBe(16);
      expect(most).toBe(1);
    });

    it('aborts the signal when one part is lost; release frees the other parts and reports the loss', async () => {
      fresh();
      const l = locks();
      const all = await l.acquireAll(['keep', 'lose'], { ttl: 300, renew: { every: 50 } });
      await h.forceDelete(prefix, 'lose');
      const reason = await aborted(all.signal);
      expect(reason).toMatchObject({ code: 'LEASE_LOST', key: 'lose' });
      expect(all.state).toBe('lost');
      await expect(all.release()).rejects.toBeInstanceOf(LeaseLostError);
      expect(await heldNow('keep')).toBe(false);
    });

    it('withLocks returns the result, releases every key, and rejects when a part was lost', async () => {
      fresh();
      const l = locks();
      expect(await l.withLocks(['a', 'b'], (all) => all.keys.join('+'))).toBe('a+b');
      expect(await heldNow('a')).toBe(false);
      const lost = l.withLocks(['c', 'd'], { ttl: 300 }, async (all) => {
        await h.forceDelete(prefix, 'c');
        await aborted(all.signal);
        return 'finished anyway';
      });
      await expect(lost).rejects.toBeInstanceOf(LeaseLostError);
      expect(await heldNow('d')).toBe(false);
    });

    it('refuses an empty list, a repeated key and a non-array with an InvalidOptionError', async () => {
      fresh();
      const l = locks();
      await expect(l.acquireAll([])).rejects.toBeInstanceOf(InvalidOptionError);
      await expect(l.tryAcquireAll(['a', 'b', 'a'])).rejects.toMatchObject({ option: 'keys[2]' });
      await expect(l.acquireAll('a' as unknown as string[])).rejects.toBeInstanceOf(InvalidOptionError);
      await expect(l.acquireAll(['a', ''])).rejects.toBeInstanceOf(InvalidOptionError);
      await expect(l.withLocks(['a'], undefined as unknown as () => void)).rejects.toBeInstanceOf(InvalidOptionError);
    });
  });

  describe('reentrancy', () => {
    it('without the option a nested acquire of a held key waits like any other, and times out', async () => {
      fresh();
      const l = locks();
      await l.withLock('plain', async (lease) => {
        expect(lease.holds).toBe(1);
        await expect(l.acquire('plain', { wait: 100 })).rejects.toBeInstanceOf(LockTimeoutError);
        expect(await l.tryAcquire('plain')).toBeNull();
      });
      // A reentrant manager's call with reentrant: false does not join either.
      const r = locks({ reentrant: true });
      await r.withLock('plain', async () => {
        await expect(r.acquire('plain', { wait: 100, reentrant: false })).rejects.toBeInstanceOf(LockTimeoutError);
      });
    });

    it('nested withLock of the same key runs at once; the lock is held until the outermost scope ends', async () => {
      fresh();
      const [l, other] = [locks({ reentrant: true }), locks()];
      const holds: number[] = [];
      let outerLease: Lease | undefined;
      const result = await l.withLock('re', async (outer) => {
        outerLease = outer;
        holds.push(outer.holds);
        const inner = await l.withLock('re', async (nested) => {
          expect(nested).not.toBe(outer);
          expect(nested.fence).toBe(outer.fence);
          expect(nested.token).toBe(outer.token);
          expect(nested.signal).toBe(outer.signal);
          holds.push(outer.holds, nested.holds);
          // Three deep, through another async hop.
          await new Promise((r) => setTimeout(r, 5));
          await l.withLock('re', async (deeper) => holds.push(deeper.holds));
          expect(await other.tryAcquire('re')).toBeNull();
          return 'inner';
        });
        holds.push(outer.holds);
        expect(outer.held).toBe(true);
        expect(await other.tryAcquire('re')).toBeNull(); // the nested scope's end released nothing
        return `${inner}+outer`;
      });
      expect(result).toBe('inner+outer');
      expect(holds).toEqual([1, 2, 2, 3, 1]);
      expect(outerLease!.state).toBe('released');
      expect(outerLease!.holds).toBe(0);
      const after = await other.tryAcquire('re');
      expect(after).not.toBeNull();
      await after!.release();
    });

    it('per-call reentrant: true works on a manager without the option', async () => {
      fresh();
      const l = locks();
      const fence = await l.withLock('percall', { reentrant: true }, async (outer) =>
        l.withLock('percall', { reentrant: true }, async (inner) => {
          expect(inner.holds).toBe(2);
          return outer.fence === inner.fence;
        }),
      );
      expect(fence).toBe(true);
    });

    it('nested acquire and tryAcquire give holds back one release each (idempotently), never releasing the lock', async () => {
      fresh();
      const [l, other] = [locks({ reentrant: true }), locks()];
      await l.withLock('pairs', async (outer) => {
        const a = await l.acquire('pairs');
        const b = await l.tryAcquire('pairs');
        expect(b).not.toBeNull();
        expect(outer.holds).toBe(3);
        await b!.release();
        await b!.release(); // once only
        expect(outer.holds).toBe(2);
        expect(b!.state).toBe('released');
        expect(b!.held).toBe(false);
        expect(outer.held).toBe(true);
        await expect(b!.extend()).rejects.toBeInstanceOf(LeaseReleasedError);
        await a.extend(); // a hold in force extends the lock itself
        {
          await using c = await l.acquire('pairs');
          expect(c.holds).toBe(3);
        }
        expect(outer.holds).toBe(2);
        await a.release();
        expect(outer.holds).toBe(1);
        expect(await other.tryAcquire('pairs')).toBeNull();
      });
      const after = await other.tryAcquire('pairs');
      expect(after).not.toBeNull();
      await after!.release();
    });

    it('a caller of the same manager in another async context waits until the outermost scope ends', async () => {
      fresh();
      const l = locks({ reentrant: true });
      const events: string[] = [];
      let entered!: () => void;
      const inside = new Promise<void>((r) => (entered = r));
      let finish!: () => void;
      const finished = new Promise<void>((r) => (finish = r));
      const outer = l.withLock('ctx', async () => {
        entered();
        await l.withLock('ctx', async () => {
          events.push('nested');
          await finished;
        });
        events.push('outer end');
      });
      await inside;
      // This test's own context is not inside the scope: no reentry.
      expect(await l.tryAcquire('ctx')).toBeNull();
      const waiting = l.acquire('ctx', { wait: 10_000 }).then((lease) => {
        events.push('other');
        return lease;
      });
      await new Promise((r) => setTimeout(r, 50));
      expect(events).toEqual(['nested']);
      finish();
      await outer;
      const lease = await waiting;
      expect(events).toEqual(['nested', 'outer end', 'other']);
      expect(lease.holds).toBe(1);
      await lease.release();
    });

    it('code started in a scope that runs after it ended does not reenter; another manager never does', async () => {
      fresh();
      const [l, m] = [locks({ reentrant: true }), locks({ reentrant: true })];
      let open!: () => void;
      const gate = new Promise<void>((r) => (open = r));
      let detached: Promise<Lease | null> | undefined;
      let straggler: Lease | undefined;
      await l.withLock('after', async () => {
        expect(await m.tryAcquire('after')).toBeNull(); // same async context, another manager
        straggler = await l.acquire('after'); // a hold that outlives the scope
        detached = (async () => {
          await gate;
          return l.tryAcquire('after');
        })();
      });
      // The outermost end released the lock; the forgotten hold sees it.
      expect(straggler!.state).toBe('released');
      expect(await aborted(straggler!.signal)).toBeInstanceOf(LeaseReleasedError);
      await straggler!.release(); // nothing left to do
      const holder = await m.acquire('after');
      open();
      expect(await detached).toBeNull(); // the scope had ended: a plain attempt, refused
      await holder.release();
    });

    it('concurrent branches inside one scope share the hold: they are not excluded from each other', async () => {
      fresh();
      const l = locks({ reentrant: true });
      let inside = 0;
      let most = 0;
      const branch = () =>
        l.withLock('branches', async () => {
          inside++;
          most = Math.max(most, inside);
          await new Promise((r) => setTimeout(r, 20));
          inside--;
        });
      await l.withLock('branches', async (lease) => {
        await Promise.all([branch(), branch()]);
        expect(lease.holds).toBe(1);
      });
      expect(most).toBe(2);
    });

    it('other keys inside a scope are acquired as usual, and scopes nest across keys', async () => {
      fresh();
      const [l, other] = [locks({ reentrant: true }), locks()];
      await l.withLock('a', async (a) => {
        await l.withLock('b', async (b) => {
          expect(b.token).not.toBe(a.token); // an independent lease
          expect(b.holds).toBe(1);
          const again = await l.acquire('a');
          expect(again.holds).toBe(2);
          await again.release();
          expect(await other.tryAcquire('b')).toBeNull();
        });
        const b2 = await other.tryAcquire('b');
        expect(b2).not.toBeNull();
        await b2!.release();
      });
    });

    it('a loss while nested aborts the one signal every level sees, and every level rejects', async () => {
      fresh();
      const l = locks({ reentrant: true });
      let innerError: unknown;
      const outer = l.withLock('lost', { ttl: 300 }, async (lease) => {
        innerError = await l
          .withLock('lost', async (nested) => {
            await h.forceDelete(prefix, 'lost');
            const reason = await aborted(nested.signal);
            expect(reason).toMatchObject({ code: 'LEASE_LOST', reason: 'gone' });
            expect(lease.signal.aborted).toBe(true);
            expect(nested.state).toBe('lost');
            expect(lease.holds).toBe(0);
            return 'finished anyway';
          })
          .catch((e: unknown) => e);
        // Still inside the scope: a reentrant acquire refuses with the loss instead of taking the lock anew.
        await expect(l.acquire('lost')).rejects.toBeInstanceOf(LeaseLostError);
      });
      await expect(outer).rejects.toBeInstanceOf(LeaseLostError);
      expect(innerError).toBeInstanceOf(LeaseLostError);
    });

    it('a nested call may not ask for another TTL, or for renewal the outer lease lacks; bad values are refused', async () => {
      fresh();
      const l = locks({ reentrant: true });
      expect(() => locks({ reentrant: 'yes' as unknown as boolean })).toThrow(InvalidOptionError);
      await expect(l.acquire('opts', { reentrant: 1 as unknown as boolean })).rejects.toBeInstanceOf(InvalidOptionError);
      await l.withLock('opts', { ttl: 5000, renew: false }, async (outer) => {
        await expect(l.acquire('opts', { ttl: 6000 })).rejects.toMatchObject({ code: 'INVALID_OPTION', option: 'ttl' });
        await expect(l.acquire('opts', { renew: true })).rejects.toMatchObject({ code: 'INVALID_OPTION', option: 'renew' });
        // withLock's default renewal is not asked for: it runs under the outer lease as it is.
        const same = await l.withLock('opts', { ttl: 5000 }, async (nested) => nested.ttl);
        expect(same).toBe(5000);
        await expect(l.acquire('opts', { signal: AbortSignal.abort(new Error('stop')) })).rejects.toThrow('stop');
        expect(outer.holds).toBe(1);
      });
    });

    itIf(can.semaphores)('semaphore permits are not reentrant: the option is refused there', async () => {
      fresh();
      const sem = locks({ reentrant: true }).semaphore('sem', { limit: 1 });
      await expect((async () => sem.acquire({ reentrant: true } as never))()).rejects.toMatchObject({
        code: 'INVALID_OPTION',
        option: 'options.reentrant',
      });
    });
  });

  describe('close', () => {
    it('stops waits with a LockAbortedError, releases held leases, and refuses later calls', async () => {
      fresh();
      const [a, b, c] = [locks(), locks(), locks()];
      const held = await a.acquire('closing', { ttl: 10_000 });
      const mine = await b.acquire('mine', { ttl: 10_000 });
      const waiting = b.acquire('closing', { wait: 60_000 }).catch((e: unknown) => e);
      await queued('closing');
      await b.close();
      expect(await waiting).toBeInstanceOf(LockAbortedError);
      expect(mine.state).toBe('released');
      await expect(b.acquire('x')).rejects.toBeInstanceOf(ClosedError);
      const free = await c.tryAcquire('mine');
      expect(free).not.toBeNull();
      await free!.release();
      await held.release();
    });
  });
}
