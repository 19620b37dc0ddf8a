/**
 * The end of a lease's validity, on every backend: a lease whose validity ran out while nothing
 * watched it (no `signal` asked for, no watchdog, no caller of its manager waiting behind it) is
 * lost, and `release()` and `extend()` must say so, however long the key lives on in the backend.
 *
 * The managers that hold these leases use `driftFactor: 0.5`, so that a lease's validity ends
 * about half a TTL before its key expires in the backend: the window in which a release would
 * still find the key holding its token is then wide enough to land in every time. (With the
 * default factor the window is 1 % of the TTL plus 2 ms, and the same happens when the release
 * lands in it.)
 */
import { describe, expect, it } from 'vitest';
import { LeaseLostError, type Lease } from '../../src/index.js';
import type { BackendHarness } from '../helpers/harness.js';
import { contractHarness } from './contract-harness.js';
import { aborted } from './lock-contract.js';

/** The holder's managers: validity ends at `sentAt + ttl / 2 - 2 ms`, the key expires at `sentAt + ttl` at the earliest. */
const WIDE_DRIFT = { driftFactor: 0.5 };

/**
 * Resolves once `lease.validUntil` has passed on the monotonic clock, without looking at the
 * lease in a way that would notice its expiry (`state`, `held`, `signal`). This is time passing,
 * not a wait for an event: nothing happens when a validity nobody watches runs out.
 */
export async function pastValidity(lease: Lease): Promise<void> {
  while (performance.now() < lease.validUntil) {
    await new Promise((r) => setTimeout(r, Math.ceil(lease.validUntil - performance.now()) + 1));
  }
}

export function leaseEndContract(makeHarness: () => Promise<BackendHarness>): void {
  const c = contractHarness(makeHarness);
  const { locks, fresh } = c;
  /** Resolves once a waiter is queued for the lock in the backend (polls: no public event announces it). */
  const queued = async (name: string): Promise<void> => {
    const end = performance.now() + 5000;
    while ((await c.h.queued(c.prefix, name)) < 1) {
      if (performance.now() > end) throw new Error(`no waiter queued for "${name}" within 5 s`);
      await new Promise((r) => setTimeout(r, 2));
    }
  };

  describe('a lease whose validity ran out while nothing watched it', () => {
    it('release rejects with LeaseLostError (expired), aborts the signal with it, and frees the key the backend still held', async () => {
      fresh();
      const [a, b] = [locks(WIDE_DRIFT), locks()];
      const lease = await a.acquire('overrun', { ttl: 400 }); // valid ~198 ms; the key lives >= 400 ms
      await pastValidity(lease);
      const error = await lease.release().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LeaseLostError);
      expect(error).toMatchObject({ code: 'LEASE_LOST', reason: 'expired', key: 'overrun', fence: lease.fence });
      expect(lease.state).toBe('lost');
      expect(lease.lostError).toBe(error);
      expect(lease.signal.reason).toBe(error);
      await expect(lease.release()).rejects.toBe(error); // and again: it stays lost
      // The key, whose TTL had not run out in the backend, was given back with our token.
      const next = await b.tryAcquire('overrun');
      expect(next).not.toBeNull();
      expect(next!.fence).toBeGreaterThan(lease.fence);
      await next!.release();
    });

    it('withLock without the watchdog rejects with LeaseLostError (expired) when the callback outlasts the validity, and frees the lock', async () => {
      fresh();
      const [a, b] = [locks(WIDE_DRIFT), locks()];
      const result = a.withLock('slow-job', { ttl: 400, renew: false }, async (lease) => {
        await pastValidity(lease);
        return 'done';
      });
      await expect(result).rejects.toMatchObject({ code: 'LEASE_LOST', reason: 'expired', key: 'slow-job' });
      const next = await b.tryAcquire('slow-job');
      expect(next).not.toBeNull();
      await next!.release();
    });

    it('release passes the lock on to a waiter of another manager at once, as a release would', async () => {
      fresh();
      const [a, b] = [locks(WIDE_DRIFT), locks({ strategy: 'notify' })];
      const sentAt = performance.now();
      const lease = await a.acquire('passed-on', { ttl: 600 }); // valid ~298 ms; the key lives >= 600 ms
      const waiting = b.acquire('passed-on', { wait: 5000 });
      await queued('passed-on');
      await pastValidity(lease);
      await expect(lease.release()).rejects.toMatchObject({ code: 'LEASE_LOST', reason: 'expired' });
      const next = await waiting;
      // Woken by the release, not by the key's TTL running out in the backend.
      expect(performance.now()).toBeLessThan(sentAt + 600);
      expect(next.fence).toBeGreaterThan(lease.fence);
      await next.release();
    });

    it('extend rejects with LeaseLostError (expired) and extends nothing; release then reports the same loss and frees the key', async () => {
      fresh();
      const [a, b] = [locks(WIDE_DRIFT), locks()];
      const lease = await a.acquire('late-extend', { ttl: 400 });
      const validUntil = lease.validUntil;
      await pastValidity(lease);
      const error = await lease.extend().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LeaseLostError);
      expect(error).toMatchObject({ code: 'LEASE_LOST', reason: 'expired', key: 'late-extend' });
      expect(lease.validUntil).toBe(validUntil);
      expect(await aborted(lease.signal)).toBe(error);
      await expect(lease.release()).rejects.toBe(error);
      const next = await b.tryAcquire('late-extend');
      expect(next).not.toBeNull();
      await next!.release();
    });
  });

  describe('a lease left to expire (letExpire, close({ release: false }))', () => {
    it('release() and the end of withLock leave the lock taken until its TTL; it then ends as expired', async () => {
      fresh();
      const [a, b] = [locks(), locks()];
      const held = await a.withLock('tick', { ttl: 500 }, async (lease) => {
        lease.letExpire();
        expect(lease.leftToExpire).toBe(true);
        await lease.release(); // does nothing now
        return lease;
      });
      expect(await b.tryAcquire('tick')).toBeNull();
      // Its watchdog is stopped: the lease ends when its validity runs out, and the key expires.
      expect(await aborted(held.signal)).toMatchObject({ code: 'LEASE_LOST', reason: 'expired', key: 'tick' });
      const next = await b.acquire('tick', { wait: 2000 });
      expect(next.fence).toBeGreaterThan(held.fence);
      await next.release();
    });

    it('a caller of the same manager waiting behind it gets the lock once its TTL ran out, nothing touching the lease', async () => {
      fresh();
      const a = locks();
      const held = await a.acquire('tick-local', { ttl: 300 });
      held.letExpire();
      const startedAt = performance.now();
      const next = await a.acquire('tick-local', { wait: 3000 });
      expect(performance.now() - startedAt).toBeLessThan(1500);
      expect(next.fence).toBeGreaterThan(held.fence);
      await next.release();
    });

    it('close({ release: false }) leaves every held lease, renewed or not, to expire at its TTL', async () => {
      fresh();
      const [a, b] = [locks(), locks()];
      const renewed = await a.acquire('renewed', { ttl: 500, renew: true });
      const plain = await a.acquire('plain', { ttl: 500 });
      const startedAt = performance.now();
      await a.close({ release: false });
      expect(renewed.leftToExpire && plain.leftToExpire).toBe(true);
      expect(await b.tryAcquire('renewed')).toBeNull();
      expect(await b.tryAcquire('plain')).toBeNull();
      // Not renewed past its TTL: another manager gets each once its key expired.
      const [x, y] = await Promise.all([b.acquire('renewed', { wait: 3000 }), b.acquire('plain', { wait: 3000 })]);
      expect(performance.now() - startedAt).toBeLessThan(1500);
      await Promise.all([x.release(), y.release()]);
    });

    it('letExpire on a reentrant handle leaves the outer lease to expire: the outer scope does not release it', async () => {
      fresh();
      const [a, b] = [locks({ reentrant: true }), locks()];
      const outer = await a.withLock('nested', { ttl: 500 }, async (lease) => {
        await a.withLock('nested', async (inner) => inner.letExpire());
        expect(lease.leftToExpire).toBe(true);
        return lease;
      });
      expect(outer.state).toBe('held');
      expect(await b.tryAcquire('nested')).toBeNull();
    });

    it('close({ release: true }) or close() still releases; a bad option is refused', async () => {
      fresh();
      const [a, b] = [locks(), locks()];
      await a.acquire('released', { ttl: 5000 });
      await expect(a.close({ release: 'no' as never })).rejects.toMatchObject({ code: 'INVALID_OPTION' });
      await expect(a.close({ keep: true } as never)).rejects.toMatchObject({ code: 'INVALID_OPTION' });
      await a.close({ release: true });
      const next = await b.tryAcquire('released');
      expect(next).not.toBeNull();
      await next!.release();
    });
  });
}
