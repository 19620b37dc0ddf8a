/**
 * Part of the lock contract (run by lockContract on every backend): the operator's view. inspect
 * (a lock's holder, TTL, fence and waiters), list, and forceRelease.
 */
import { describe, expect, it } from 'vitest';
import { hostname } from 'node:os';
import { InvalidOptionError, LeaseLostError, type LockInfo, type Locks } from '../../src/index.js';
import { aborted, type LockContractContext } from './lock-contract-context.js';

/** inspect, list and forceRelease. */
export function inspectSection(ctx: LockContractContext): void {
  const { can, itIf, locks, queued, fresh } = ctx;
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
}
