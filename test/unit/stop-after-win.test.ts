/**
 * A wait stopped between its win and its `acquire()` resolving (docs/safety.md, "A caller that
 * gives up": the last row but one): the caller gets the stop's reason and the lease is released,
 * which passes the lock or the permits on. Before, a semaphore's wait returned the lease (and
 * `withPermit` ran its function) for a caller that had aborted. The stop is made to land in that
 * gap: the wait's `waitRemotely` aborts the caller's signal as it returns the grant.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createLocks, createMemoryStore, type Locks } from '../../src/index.js';
import { Waiter } from '../../src/wait/waiter.js';

const made: Locks[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  for (const locks of made.splice(0)) await locks.close();
});

function managers(): [Locks, Locks] {
  const store = createMemoryStore();
  const pair: [Locks, Locks] = [createLocks({ memory: store }), createLocks({ memory: store })];
  made.push(...pair);
  return pair;
}

/** Has the next `waitRemotely` abort `controller` with `reason` as it returns its grant. */
function abortAtTheWin(controller: AbortController, reason: Error): void {
  const original = Waiter.prototype.waitRemotely;
  vi.spyOn(Waiter.prototype, 'waitRemotely').mockImplementationOnce(async function (this: Waiter, ...args: Parameters<Waiter['waitRemotely']>) {
    const grant = await original.apply(this, args);
    controller.abort(reason);
    return grant;
  });
}

describe('a wait stopped between its win and its acquire() resolving', () => {
  it('a lock: rejects with the reason, and the lock is passed on', async () => {
    const [a, b] = managers();
    const held = await a.acquire('job', { ttl: 10_000 });
    const controller = new AbortController();
    const reason = new Error('the caller gave up');
    abortAtTheWin(controller, reason);
    const waiting = b.acquire('job', { ttl: 10_000, wait: 10_000, signal: controller.signal });
    await held.release();
    await expect(waiting).rejects.toBe(reason);
    const next = await a.acquire('job', { ttl: 10_000, wait: 2000 }); // b's lease was released
    expect(next.fence).toBeGreaterThan(held.fence);
    await next.release();
  });

  it('a semaphore: rejects with the reason, and the permits are given back', async () => {
    const [a, b] = managers();
    const poolA = a.semaphore('pool', { limit: 1 });
    const poolB = b.semaphore('pool', { limit: 1 });
    const held = await poolA.acquire({ ttl: 10_000 });
    const controller = new AbortController();
    const reason = new Error('the caller gave up');
    abortAtTheWin(controller, reason);
    let ran = false;
    const waiting = poolB.withPermit({ ttl: 10_000, wait: 10_000, signal: controller.signal }, () => {
      ran = true;
    });
    await held.release();
    await expect(waiting).rejects.toBe(reason);
    expect(ran).toBe(false);
    const next = await poolA.acquire({ ttl: 10_000, wait: 2000 }); // the permit came back
    await next.release();
  });
});
