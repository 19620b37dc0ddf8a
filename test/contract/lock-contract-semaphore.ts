/**
 * Part of the lock contract (run by lockContract on every backend): counting semaphores,
 * read-write locks and fair locks where the backend counts permits, and the UnsupportedError where
 * it cannot.
 */
import { describe, expect } from 'vitest';
import { InvalidOptionError, LeaseLostError, LockTimeoutError, UnsupportedError, type Lease } from '../../src/index.js';
import type { LockContractContext } from './lock-contract-context.js';

/** Semaphores, read-write locks and fair locks (or their refusal where permits cannot be counted). */
export function semaphoreSection(ctx: LockContractContext): void {
  const { can, itIf, locks, queuedFor, fresh } = ctx;
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
}
