/**
 * Part of the lock contract (run by lockContract on every backend): multi-locks (acquireAll,
 * tryAcquireAll, withLocks): all keys or none, rollback, no deadlock, and the loss of one part.
 */
import { describe, expect, it } from 'vitest';
import { InvalidOptionError, LeaseLostError, LeaseReleasedError, LockTimeoutError } from '../../src/index.js';
import { aborted, type LockContractContext } from './lock-contract-context.js';

/** Multi-locks: acquireAll, tryAcquireAll and withLocks. */
export function multiLockSection(ctx: LockContractContext): void {
  const { locks, fresh } = ctx;
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
      await ctx.h.forceDelete(ctx.prefix, 'lose');
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
        await ctx.h.forceDelete(ctx.prefix, 'c');
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
}
