/**
 * Part of the lock contract (run by lockContract on every backend): waiting for a held lock. A
 * waiter across managers (under each strategy: its release, the holder's TTL, its timeout, its
 * abort), and the in-process queue of one manager's callers (arrival order, hand-offs, leaving it).
 */
import { describe, expect, it } from 'vitest';
import { LeaseLostError, LockTimeoutError, type Lease } from '../../src/index.js';
import { ownTimersLeft } from '../helpers/own-timers.js';
import type { LockContractContext } from './lock-contract-context.js';

/** Waiting: a waiter gets the lock at the holder's release or TTL, or times out, or is aborted. */
export function waitingSection(ctx: LockContractContext): void {
  const { strategies, locks, queued, fresh } = ctx;
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
}

/** The in-process queue: one manager's callers served in order, and waiters of other managers not held back. */
export function localQueueSection(ctx: LockContractContext): void {
  const { can, itIf, locks, queued, fresh } = ctx;
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
}
