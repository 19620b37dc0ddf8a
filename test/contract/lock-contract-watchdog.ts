/**
 * Part of the lock contract (run by lockContract on every backend): withLock and the watchdog that
 * renews its lease, and what they report when the lease is lost.
 */
import { describe, expect, it } from 'vitest';
import { LeaseLostError, LockSuppressedError, type Lease } from '../../src/index.js';
import { aborted, type LockContractContext } from './lock-contract-context.js';

/** withLock and the watchdog: the result, the release, renewals, and a loss while the callback runs. */
export function watchdogSection(ctx: LockContractContext): void {
  const { locks, fresh } = ctx;
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
        await ctx.h.forceDelete(ctx.prefix, 'watched');
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
          await ctx.h.forceDelete(ctx.prefix, 'both');
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
      await ctx.h.forceDelete(ctx.prefix, 'r2');
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
}
