/**
 * Part of the lock contract (run by lockContract on every backend): the basics. A lease's
 * acquire and release, its fencing tokens, mutual exclusion between managers, and a manager's close.
 */
import { describe, expect, it } from 'vitest';
import { ClosedError, LeaseReleasedError, LockAbortedError, StaleFenceError, type Lease } from '../../src/index.js';
import { aborted, type LockContractContext } from './lock-contract-context.js';

/** Acquire and release: a lease's token, fence and validity; tryAcquire; `await using`. */
export function acquireAndReleaseSection(ctx: LockContractContext): void {
  const { locks, fresh } = ctx;
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
}

/** Fencing tokens: they grow with every acquisition, and a fenced write refuses an older one. */
export function fencingTokensSection(ctx: LockContractContext): void {
  const { can, itIf, locks, fresh } = ctx;
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
      const resource = `${ctx.prefix}resource`;
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
      expect(await l.fencedRead(`${ctx.prefix}never-written`)).toBeNull();
      await current.release();
    });
  });
}

/** Mutual exclusion: never two holders at once, under each waiting strategy. */
export function mutualExclusionSection(ctx: LockContractContext): void {
  const { strategies, locks, fresh } = ctx;
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
}

/** Close: a closed manager's waits end, its leases are released, later calls are refused. */
export function closeSection(ctx: LockContractContext): void {
  const { locks, queued, fresh } = ctx;
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
