/**
 * Part of the lock contract (run by lockContract on every backend): reentrancy of one lock within
 * an async context (nested scopes, holds, a loss while nested, the options a nested call may not
 * change). Reentrancy beyond one lock is test/contract/reentrancy-contract.ts.
 */
import { describe, expect, it } from 'vitest';
import { InvalidOptionError, LeaseLostError, LeaseReleasedError, LockTimeoutError, type Lease } from '../../src/index.js';
import { aborted, type LockContractContext } from './lock-contract-context.js';

/** Reentrancy: nested acquires of one key in one async context, with the `reentrant` option. */
export function reentrancySection(ctx: LockContractContext): void {
  const { can, itIf, locks, fresh } = ctx;
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
            await ctx.h.forceDelete(ctx.prefix, 'lost');
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
}
