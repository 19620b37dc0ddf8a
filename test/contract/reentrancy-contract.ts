/**
 * Reentrancy beyond one lock (issue 17): what a multi-lock, a read-write lock and a lease handed
 * on in memory do inside reentrant scopes, and what the outermost scope reports after a loss.
 * Every backend that hands a released lock on and has semaphores runs it: one Redis through
 * ioredis and node-redis, and the in-memory store.
 */
import { describe, expect, it } from 'vitest';
import { LeaseLostError, LockTimeoutError, type Lease } from '../../src/index.js';
import type { BackendHarness } from '../helpers/harness.js';
import { contractHarness } from './contract-harness.js';
import { aborted } from './lock-contract.js';

/** A promise and the function that resolves it: for steps of a test that wait for each other. */
function gate<T = void>(): { promise: Promise<T>; open: (value: T) => void } {
  let open!: (value: T) => void;
  const promise = new Promise<T>((resolve) => (open = resolve));
  return { promise, open };
}

export function reentrancyContract(makeHarness: () => Promise<BackendHarness>): void {
  const c = contractHarness(makeHarness);
  const { locks, fresh } = c;
  /** Resolves once a waiter is queued for the read-write lock `name` in the backend (polls: no public event announces it). */
  const writerQueued = async (name: string): Promise<void> => {
    const end = performance.now() + 5000;
    while ((await c.h.semaphoreQueued(c.prefix, name, 'rw')) < 1) {
      if (performance.now() > end) throw new Error(`no waiter queued for read-write lock "${name}" within 5 s`);
      await new Promise((r) => setTimeout(r, 2));
    }
  };
  /** Deletes `name` behind its holder's back and has `lease` find out (its extend rejects with the loss). */
  const loseNow = async (name: string, lease: Lease): Promise<LeaseLostError> => {
    await c.h.forceDelete(c.prefix, name);
    const error = await lease.extend().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LeaseLostError);
    return error as LeaseLostError;
  };

  describe('reentrancy: multi-locks inside a scope', () => {
    it('after the scope lease was lost, acquireAll, tryAcquireAll and withLocks reject with LEASE_LOST and take nothing', async () => {
      fresh();
      const [l, other] = [locks({ reentrant: true }), locks()];
      const settled = (p: Promise<unknown>): Promise<unknown> => p.then((v) => v, (e: unknown) => e);
      let loss: LeaseLostError | undefined;
      let seen: Record<string, unknown> = {};
      const outer = l.withLock('x', async (lease) => {
        loss = await loseNow('x', lease);
        seen = {
          acquire: await settled(l.acquire('x')), // what acquire and withLock in the scope already do
          // The multi-lock's free-keys script must not take a fresh lease on the lost key.
          acquireAll: await settled(l.acquireAll(['x', 'y'])),
          tryAcquireAll: await settled(l.tryAcquireAll(['x', 'y'])),
          withLocks: await settled(l.withLocks(['y', 'x'], () => 'ran')),
        };
      });
      expect(await settled(outer)).toBe(loss);
      expect(Object.keys(seen)).toEqual(['acquire', 'acquireAll', 'tryAcquireAll', 'withLocks']);
      for (const [call, outcome] of Object.entries(seen)) expect(outcome, call).toBe(loss);
      // Neither key was left held by the refused calls.
      const both = await other.tryAcquireAll(['x', 'y']);
      expect(both).not.toBeNull();
      await both!.release();
    });

    it("acquireAll and withLocks join the scope's key: neither the manager's default ttl nor withLocks' renewal counts as a request", async () => {
      fresh();
      const [l, other] = [locks({ reentrant: true, ttl: 8000 }), locks()];
      await l.withLock('x', { ttl: 5000, renew: false }, async (outer) => {
        const all = await l.acquireAll(['y', 'x']);
        expect(all.lease('x').fence).toBe(outer.fence);
        expect(outer.holds).toBe(2);
        expect(all.lease('y').ttl).toBe(8000); // a key of its own takes the manager's default
        await all.release();
        expect(outer.holds).toBe(1);
        expect(outer.held).toBe(true); // the multi-lease's release gave back its hold only
        const y = await other.tryAcquire('y');
        expect(y).not.toBeNull();
        await y!.release();
        const holds = await l.withLocks(['x', 'z'], async (multi) => {
          expect(multi.lease('x').fence).toBe(outer.fence);
          return outer.holds;
        });
        expect(holds).toBe(2);
        expect(outer.holds).toBe(1);
        // What the caller does ask for is still checked against the scope's lease.
        await expect(l.acquireAll(['x', 'w'], { ttl: 6000 })).rejects.toMatchObject({ code: 'INVALID_OPTION', option: 'ttl' });
        await expect(l.withLocks(['x', 'w'], { renew: true }, () => 'ran')).rejects.toMatchObject({ code: 'INVALID_OPTION', option: 'renew' });
        expect(outer.holds).toBe(1);
        expect((await l.inspect('w')).held).toBe(false);
      });
    });

    it('withLock of a key inside withLocks on a reentrant manager joins its part instead of waiting for itself', async () => {
      fresh();
      const [l, other] = [locks({ reentrant: true }), locks()];
      const seen = await l.withLocks(['k', 'x'], async (all) => {
        const inner = await l.withLock('k', { wait: 1000 }, async (lease) => ({ fence: lease.fence, holds: lease.holds }));
        expect(await other.tryAcquire('k')).toBeNull(); // the nested scope's end released nothing
        const again = await l.acquire('x', { wait: 1000 });
        expect(again.holds).toBe(2);
        await again.release();
        return { ...inner, part: all.fence('k') };
      });
      expect(seen.holds).toBe(2);
      expect(seen.fence).toBe(seen.part); // the part's own lease
      const after = await other.tryAcquireAll(['k', 'x']);
      expect(after).not.toBeNull();
      await after!.release();
    });
  });

  describe('reentrancy: the outermost scope after a loss', () => {
    it('rejects with the LeaseLostError itself (LEASE_LOST), not SUPPRESSED, when fn threw the loss the release reports', async () => {
      fresh();
      const l = locks({ reentrant: true });
      let loss: LeaseLostError | undefined;
      const outer = l.withLock('x', async () => {
        // The nested scope rejects with the loss, and nothing catches it.
        await l.withLock('x', async (nested) => {
          loss = await loseNow('x', nested);
        });
      });
      const error = await outer.catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LeaseLostError);
      expect(error).toBe(loss);
      // Without reentrancy too: withLock and withLocks whose callback threw the loss.
      const plain = locks();
      const single = await plain
        .withLock('p', async (lease) => {
          await loseNow('p', lease);
          lease.signal.throwIfAborted(); // throws the loss, the signal's reason
        })
        .catch((e: unknown) => e);
      expect(single).toMatchObject({ code: 'LEASE_LOST', key: 'p' });
      const multi = await plain
        .withLocks(['q', 'r'], async (all) => {
          await c.h.forceDelete(c.prefix, 'q');
          await all.extend(); // rejects with q's loss
        })
        .catch((e: unknown) => e);
      expect(multi).toMatchObject({ code: 'LEASE_LOST', key: 'q' });
    });
  });

  describe('reentrancy: a lease handed on in memory lives in its waiter\'s async context', () => {
    for (const path of ['hand-off', 'pump'] as const) {
      it(`its loss, dispatched from its own timers, does not join the releaser's open scope (${path})`, async () => {
        fresh();
        // 'pump': no hand-off; the release frees the lock and the queue's head is then served from the releaser's call.
        const l = locks({ reentrant: true, ...(path === 'pump' ? { localHandoffs: 0 } : {}) });
        let aOpen = true;
        const aHoldsK = gate();
        const endK = gate();
        const endX = gate();
        // Context A holds x and, nested, k.
        const a = l.withLock('x', async () => {
          await l.withLock('k', async () => {
            aHoldsK.open();
            await endK.promise;
          });
          await endX.promise;
          aOpen = false;
        });
        await aHoldsK.promise;
        // Context B waits for k in memory behind A (queued as soon as the call is made).
        const bHasK = gate();
        const heard = gate<{ result: Promise<{ holds: number; aOpen: boolean }> }>();
        const b = l.withLock('k', { ttl: 600 }, async (lease) => {
          lease.signal.addEventListener(
            'abort',
            () => heard.open({ result: l.withLock('x', async (x) => ({ holds: x.holds, aOpen })) }),
            { once: true },
          );
          bHasK.open();
          await aborted(lease.signal);
        });
        const bEnded = b.catch((e: unknown) => e); // it rejects with the loss before the test looks
        endK.open(); // A's k scope ends: B gets k
        await bHasK.promise;
        await c.h.forceDelete(c.prefix, 'k'); // B's watchdog finds k gone at its next renewal
        const { result } = await heard.promise;
        endX.open();
        await a;
        expect(await result).toEqual({ holds: 1, aOpen: false }); // waited for A's x, and then held it alone
        expect(await bEnded).toMatchObject({ code: 'LEASE_LOST', key: 'k' });
      });
    }
  });

  describe('reentrancy: read-write locks', () => {
    it('a nested withRead joins the held read, even with a writer queued in between', async () => {
      fresh();
      const [l, w] = [locks({ reentrant: true }), locks()];
      const rw = l.readWriteLock('doc');
      let writer: Promise<Lease> | undefined;
      const holds = await rw.withRead(async (outer) => {
        writer = w.readWriteLock('doc').write({ wait: 10_000 });
        await writerQueued('doc');
        const inner = await rw.withRead({ wait: 1500 }, async (read) => {
          expect(read.fence).toBe(outer.fence);
          return read.holds;
        });
        const handle = await rw.read({ wait: 1500 });
        expect(handle.holds).toBe(2);
        await handle.release();
        return [inner, outer.holds];
      });
      expect(holds).toEqual([2, 1]);
      const lease = await writer!; // the outermost read's end let the writer in
      await lease.release();
    });

    it('a write inside a read scope is refused with UpgradeDeadlockError at once; reads and writes inside a write scope join', async () => {
      fresh();
      const l = locks({ reentrant: true, wait: 1000 });
      const rw = l.readWriteLock('doc');
      await rw.withRead(async (read) => {
        await expect(rw.write()).rejects.toMatchObject({ name: 'UpgradeDeadlockError', code: 'UPGRADE_DEADLOCK' });
        await expect(rw.tryWrite()).rejects.toMatchObject({ code: 'UPGRADE_DEADLOCK' });
        await expect(rw.withWrite(() => 'ran')).rejects.toMatchObject({ code: 'UPGRADE_DEADLOCK' });
        expect(read.holds).toBe(1);
      });
      const seen = await rw.withWrite(async (write) => {
        const inRead = await rw.withRead(async (read) => read.fence === write.fence && write.holds === 2);
        const inWrite = await rw.withWrite(async (nested) => nested.fence === write.fence && write.holds === 2);
        return [inRead, inWrite, write.holds];
      });
      expect(seen).toEqual([true, true, 1]);
    });

    it('without reentrancy a nested read waits behind a queued writer (as documented) and times out', async () => {
      fresh();
      const [l, w] = [locks(), locks()];
      const rw = l.readWriteLock('doc');
      let writer: Promise<Lease> | undefined;
      await rw.withRead(async () => {
        writer = w.readWriteLock('doc').write({ wait: 10_000 });
        await writerQueued('doc');
        await expect(rw.withRead({ wait: 100 }, () => 'ran')).rejects.toBeInstanceOf(LockTimeoutError);
      });
      await (await writer!).release();
    });
  });
}
