/**
 * A waiter whose winning attempt is answered after its TTL ran out (too late to be of use: ioredis
 * retries a script refused by a Cluster slot that migrates for ~1.6 s, and answers once the
 * migration is over), on the in-memory backend wrapped so that one acquire answers late and
 * releases reach the store later than they are sent (as a command the client re-sends after a
 * redirection or a NOSCRIPT does). The waiter tries again with the same token, which refreshes the
 * lease; it must not give the lease back first, or that release, overtaken by the next attempt,
 * frees the lease the waiter then returns.
 */
import { describe, expect, it, vi } from 'vitest';
import type { Backend } from '../../src/backend/backend.js';
import { createMemoryStore, type Lease, type Locks } from '../../src/index.js';
import { memoryManagers } from '../helpers/memory-managers.js';

/**
 * The switches of the wrapped backend: `late` delays the reply of the next acquire that wins, by
 * `lateBy` ms; `runLate` delays every acquire by as much before it runs; `releaseDelay` delays
 * every release before it runs.
 */
const state = { late: false, lateBy: 0, runLate: 0, releaseDelay: 0 };

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

vi.mock('../../src/backend/choose.js', async (importOriginal) =>
  (await import('../helpers/wrapped-backend.js')).wrapChosenBackend(await importOriginal<typeof import('../../src/backend/choose.js')>(), (backend) => ({
    async acquire(...call: Parameters<Backend['acquire']>) {
      if (state.runLate > 0) await sleep(state.runLate);
      const reply = await backend.acquire(...call);
      if (reply.acquired && state.late) {
        state.late = false; // once
        await sleep(state.lateBy);
      }
      return reply;
    },
    async release(...call: Parameters<Backend['release']>) {
      await sleep(state.releaseDelay);
      return backend.release(...call);
    },
  })),
);

const manager = memoryManagers(() => {
  Object.assign(state, { late: false, lateBy: 0, runLate: 0, releaseDelay: 0 });
});

/** One kind of lock: `hold` takes it for 5 s, `wait` waits for it (up to 5 s) with a lease of `ttl` ms. */
type Subject = (l: Locks) => { hold: () => Promise<Lease>; wait: () => Promise<Lease> };

/** Every kind of lock a waiter waits for in the backend, its waits' leases of `ttl` ms. */
function subjects(ttl: number): Array<[string, Subject]> {
  return [
    ['a semaphore', (l) => ({ hold: () => l.semaphore('job', { limit: 1 }).acquire({ ttl: 5000 }), wait: () => l.semaphore('job', { limit: 1 }).acquire({ ttl, wait: 5000 }) })],
    ['a fair lock', (l) => ({ hold: () => l.fairLock('job').acquire({ ttl: 5000 }), wait: () => l.fairLock('job').acquire({ ttl, wait: 5000 }) })],
    ['a read-write lock', (l) => ({ hold: () => l.readWriteLock('job').read({ ttl: 5000 }), wait: () => l.readWriteLock('job').write({ ttl, wait: 5000 }) })],
    ['a lock', (l) => ({ hold: () => l.acquire('job', { ttl: 5000 }), wait: () => l.acquire('job', { ttl, wait: 5000, strategy: 'backoff' }) })], // backoff: a release grants a queued lock waiter without an attempt
  ];
}

describe('a waiter whose winning attempt is answered after its TTL', () => {
  const TTL = 200;
  for (const [what, subject] of subjects(TTL)) {
    it(`${what}: returns a lease that still holds, not one its own give-back freed`, async () => {
      const store = createMemoryStore();
      const [a, b] = [manager(store), manager(store)];
      const held = await subject(a).hold();
      const waiting = subject(b).wait();
      await sleep(50); // waiting: its first attempts found the lock held
      Object.assign(state, { late: true, lateBy: TTL + 100, releaseDelay: 50 });
      await held.release();
      const lease = await waiting;
      expect(state.late).toBe(false); // it did win too late once
      expect(lease.held).toBe(true);
      await sleep(TTL / 2);
      await lease.extend(); // still ours in the store
      await lease.release();
      expect(lease.state).toBe('released');
    });
  }

  it('gives a late win back when its wait ends without a lease (the deadline before another attempt won)', async () => {
    const store = createMemoryStore();
    const [a, b] = [manager(store), manager(store)];
    const held = await a.semaphore('job', { limit: 1 }).acquire({ ttl: 5000 });
    const ttl = 150;
    const waiting = b.semaphore('job', { limit: 1 }).acquire({ ttl, wait: 250 });
    waiting.catch(() => {});
    await sleep(50);
    // Every attempt from now on runs (and wins) 180 ms after it is sent: too late for a 150 ms lease.
    state.runLate = 180;
    await held.release();
    await expect(waiting).rejects.toThrow(/timed out|waited/i);
    state.runLate = 0;
    await sleep(20); // the exit's give-back, sent as the wait ended
    // Free now, well before the lease the last late win refreshed would have expired.
    const next = await a.semaphore('job', { limit: 1 }).tryAcquire({ ttl: 5000 });
    expect(next).not.toBeNull();
    await next!.release();
  });
});

describe('a win with less than half its TTL left, while the wait has time', () => {
  const ttl = 600;
  for (const [what, subject] of subjects(ttl).filter(([what]) => what === 'a lock' || what === 'a fair lock')) {
    it(`${what}: is refreshed by one more attempt before it is returned, not handed out with a few ms left`, async () => {
      const store = createMemoryStore();
      const [a, b] = [manager(store), manager(store)];
      const held = await subject(a).hold();
      const waiting = subject(b).wait();
      await sleep(50); // waiting: its first attempts found the lock held
      // Its winning attempt answered 450 ms after it was sent: about 140 ms of validity left.
      Object.assign(state, { late: true, lateBy: 450 });
      await held.release();
      const lease = await waiting;
      expect(state.late).toBe(false); // it did win late
      expect(lease.timeLeft()).toBeGreaterThan(ttl / 2);
      await lease.release();
      expect(lease.state).toBe('released');
    });
  }
});

describe('a lease won late but still valid, with a watchdog', () => {
  it('is renewed before its validity runs out, though less than one renewal interval of it was left', async () => {
    const store = createMemoryStore();
    const [a, b] = [manager(store), manager(store)];
    const held = await a.acquire('job', { ttl: 5000 });
    const ttl = 600; // renewed every 200 ms
    const waiting = b.acquire('job', { ttl, wait: 5000, renew: true, strategy: 'backoff' });
    await sleep(50); // waiting: its first attempts found the lock held
    // Every attempt from now on runs 450 ms after it is sent: the win, and the refresh that
    // follows it, each about 140 ms of validity left; the refresh's is taken.
    state.runLate = 450;
    await held.release();
    const lease = await waiting;
    state.runLate = 0;
    expect(lease.timeLeft()).toBeLessThan(200);
    await sleep(ttl); // past the validity it was won with, and past a first renewal one interval on
    expect(lease.held).toBe(true);
    await lease.release();
    expect(lease.state).toBe('released');
  });
});
