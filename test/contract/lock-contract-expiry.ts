/**
 * Part of the lock contract (run by lockContract on every backend): a lease that runs out or is
 * taken (its loss reported by its signal and its release), and extend (which never recreates a
 * lock that is gone).
 */
import { describe, expect, it } from 'vitest';
import { LeaseLostError } from '../../src/index.js';
import { aborted, type LockContractContext } from './lock-contract-context.js';

/** A lease that expires or is taken: its signal and its release report the loss, and the new holder keeps the lock. */
export function leaseExpirySection(ctx: LockContractContext): void {
  const { locks, fresh } = ctx;
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
      await ctx.h.forceDelete(ctx.prefix, 'deleted');
      const error = await lease.release().catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'LEASE_LOST', reason: 'gone' });
      expect(lease.signal.reason).toBe(error);
      expect(lease.state).toBe('lost');
    });

    it('release by a stale holder whose key was taken reports "taken" and leaves the new holder alone', async () => {
      fresh();
      const [a, b, c] = [locks(), locks(), locks()];
      const stale = await a.acquire('t2', { ttl: 10_000 });
      await ctx.h.forceDelete(ctx.prefix, 't2');
      const current = await b.acquire('t2');
      await expect(stale.release()).rejects.toMatchObject({ code: 'LEASE_LOST', reason: 'taken' });
      expect(await c.tryAcquire('t2')).toBeNull();
      await current.release();
    });
  });
}

/** Extend: it moves the validity, and fails on a lease that is gone or ran out. */
export function extendSection(ctx: LockContractContext): void {
  const { locks, fresh } = ctx;
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
      await ctx.h.forceDelete(ctx.prefix, 'gone');
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
}
