/**
 * Part of the lock contract (run by lockContract on every backend): a wait that ran out because
 * the lock stayed held names the holder in its LockTimeoutError: its manager's description (the
 * `holder` option, on by default), and nobody when that manager registers none (`holder: false`).
 */
import { hostname } from 'node:os';
import { describe, expect, it } from 'vitest';
import { LockTimeoutError, type Lease, type LockInfo, type Locks } from '../../src/index.js';
import type { LocksSettings } from '../helpers/harness.js';

/** What the cases need of lockContract: managers on its backend under the current prefix, and a fresh prefix. */
export interface TimeoutHolderContext {
  locks(settings?: LocksSettings): Locks;
  fresh(): void;
}

/** The name a holder records itself under in these cases: spaces, parentheses, as a user writes it. */
const WHO = 'worker-7 (pid 123 on host-a)';

/** Resolves once the lock's holder is recorded (the record is written after the acquire, unawaited). */
async function recorded(l: Locks, name: string): Promise<LockInfo> {
  const end = performance.now() + 5000;
  for (;;) {
    const info = await l.inspect(name);
    if (info.holder || performance.now() > end) return info;
    await new Promise((r) => setTimeout(r, 2));
  }
}

/** The rejection of an acquire that is expected to time out. */
async function timeout(acquiring: Promise<Lease>): Promise<LockTimeoutError> {
  const error = await acquiring.then(
    (lease) => {
      void lease.release();
      throw new Error('the acquire got the lock; it was to time out');
    },
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(LockTimeoutError);
  return error as LockTimeoutError;
}

export function timeoutHolderContract(c: TimeoutHolderContext): void {
  describe('a timeout names the holder when it is recorded', () => {
    for (const strategy of ['notify', 'backoff'] as const) {
      it(`a waiter of another manager whose wait runs out gets the holder's recorded name (${strategy})`, async () => {
        c.fresh();
        const [a, b] = [c.locks({ holder: WHO }), c.locks({ strategy })];
        const held = await a.acquire('named', { ttl: 10_000 });
        expect((await recorded(b, 'named')).holder?.who).toBe(WHO);
        const error = await timeout(b.acquire('named', { wait: 200 }));
        expect(error.holder).toBe(WHO);
        expect(error.message).toContain(`held by "${WHO}"`);
        expect(error.message).not.toContain(held.token);
        expect(JSON.stringify({ ...error, message: error.message })).not.toContain(held.token);
        await held.release();
      });
    }

    it('wait: 0 (one attempt) names the holder too', async () => {
      c.fresh();
      const [a, b] = [c.locks({ holder: WHO }), c.locks()];
      const held = await a.acquire('once', { ttl: 10_000 });
      await recorded(b, 'once');
      const error = await timeout(b.acquire('once', { wait: 0 }));
      expect(error.holder).toBe(WHO);
      expect(error.message).toContain(`held by "${WHO}"`);
      await held.release();
    });

    it('a caller waiting behind a lease of its own manager gets its manager\'s recorded name', async () => {
      c.fresh();
      const l = c.locks({ holder: WHO });
      const held = await l.acquire('mine', { ttl: 10_000 });
      const error = await timeout(l.acquire('mine', { wait: 100 }));
      expect(error.holder).toBe(WHO);
      expect(error.heldHere).toBe(true);
      // Said to be this manager's own lease, and not "0 attempts": the wait never asked Redis.
      expect(error.message).toContain(`held by another lease of this same manager (in this process, recorded as "${WHO}")`);
      expect(error.message).not.toMatch(/0 attempts/);
      await held.release();
    });

    it('holder: false names nobody: holder is undefined and the message says another owner', async () => {
      c.fresh();
      const [a, b] = [c.locks({ holder: false }), c.locks()];
      const held = await a.acquire('anonymous', { ttl: 10_000 });
      for (const wait of [0, 150]) {
        const error = await timeout(b.acquire('anonymous', { wait }));
        expect(error.holder).toBeUndefined();
        expect(error.message).toContain('held by another owner');
        expect(error.message).not.toMatch(/held by "/);
      }
      // Nor on the same manager.
      const error = await timeout(a.acquire('anonymous', { wait: 50 }));
      expect(error.holder).toBeUndefined();
      expect(error.message).not.toMatch(/held by "|recorded as/);
      expect(error.message).toContain('held by another lease of this same manager (in this process)');
      await held.release();
    });

    it('the current holder is named, not an earlier one', async () => {
      c.fresh();
      const [a, b, w] = [c.locks({ holder: WHO }), c.locks({ holder: 'second' }), c.locks()];
      const first = await a.acquire('stale', { ttl: 10_000 });
      await recorded(w, 'stale');
      await first.release();
      const held = await b.acquire('stale', { ttl: 10_000 });
      const error = await timeout(w.acquire('stale', { wait: 150 }));
      expect(error.holder).toBe('second');
      expect(error.message).not.toContain(WHO);
      await held.release();
    });

    it('a default manager is named by host and pid', async () => {
      c.fresh();
      const [a, b] = [c.locks(), c.locks()];
      const held = await a.acquire('default', { ttl: 10_000 });
      const error = await timeout(b.acquire('default', { wait: 100 }));
      expect(error.holder).toBe(`${hostname()} pid ${process.pid}`);
      await held.release();
    });
  });
}
