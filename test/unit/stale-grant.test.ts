/**
 * A grant whose message is read late, while the waiter has an attempt in flight that was sent
 * after the granted lock had expired and another caller took it (the waiter's process was paused
 * or busy while the message waited in its socket). The grant must not count from that attempt:
 * the waiter would hold a lease that Redis no longer has, beside the new holder (found by the fault
 * soak, seed 696453680). On the in-memory backend (a product feature, not a mock of Redis), wrapped
 * so that the waiter's inbox messages are held back until the test lets them go, and so is the
 * reply of its next attempt that queues.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createLocks, createMemoryStore, type Locks } from '../../src/index.js';
import { openGate } from '../helpers/wrapped-backend.js';

const state = {
  /** Inbox messages of the managers made while this is set are held back until the test lets them go. */
  holdInbox: false,
  held: [] as Array<() => void>,
  ...openGate(),
};

vi.mock('../../src/backend/choose.js', async (importOriginal) => {
  const { wrapChosenBackend, gatedAcquire } = await import('../helpers/wrapped-backend.js');
  return wrapChosenBackend(await importOriginal<typeof import('../../src/backend/choose.js')>(), (backend) => {
    if (!state.holdInbox) return {}; // the waiter's manager only
    return {
      watchInbox(managerId: string, listener: (member?: string, fence?: number) => void) {
        return backend.watchInbox(managerId, (member, fence) => {
          if (state.holdInbox) state.held.push(() => listener(member, fence));
          else listener(member, fence);
        });
      },
      acquire: gatedAcquire(backend, state),
    };
  });
});

const made: Locks[] = [];
afterEach(async () => {
  Object.assign(state, { holdInbox: false, held: [], ...openGate() });
  for (const locks of made.splice(0)) await locks.close();
});

/** A manager on `store` whose waiters look again only at their holder's TTL (no re-check meanwhile). */
function manager(store: ReturnType<typeof createMemoryStore>): Locks {
  const locks = createLocks({ memory: store, recheck: 60_000 });
  made.push(locks);
  return locks;
}

/** Every promise job queued by now has run. */
const settled = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('a grant read late, while an attempt sent after it expired is in flight', () => {
  it('is not taken: the waiter gets the lock only after the new holder, with a higher fence', async () => {
    const store = createMemoryStore();
    const a = manager(store);
    const c = manager(store);
    state.holdInbox = true;
    const b = manager(store); // its inbox messages are held back until the flag is cleared
    // a's TTL is when b looks again by itself; b's own TTL (the grant's) runs out long before.
    const first = await a.acquire('job', { ttl: 600 });
    let bLease: { fence: number } | undefined;
    const waiting = b.acquire('job', { ttl: 100, wait: 10_000 }).then((lease) => (bLease = lease));
    await expect.poll(async () => (await a.inspect('job')).queued, { interval: 5 }).toBe(1); // b is queued
    await first.release(); // grants the lock to b for 100 ms; its message is held back
    await expect.poll(async () => (await a.inspect('job')).held, { interval: 10, timeout: 2000 }).toBe(false); // b's grant expired
    const cLease = await c.acquire('job', { ttl: 10_000 }); // the lock is c's now
    // b looks again at a's TTL: its attempt finds the lock c's, and the old grant's message is read while it is in flight.
    let open!: () => void;
    state.gate = new Promise<void>((resolve) => (open = resolve));
    const ran = new Promise<void>((resolve) => (state.ran = resolve));
    state.holdNext = true;
    await ran;
    state.holdInbox = false;
    for (const deliver of state.held.splice(0)) deliver();
    await settled();
    open();
    await settled();
    await settled();
    expect(bLease).toBeUndefined(); // still waiting: c holds the lock
    expect((await c.inspect('job')).fence).toBe(cLease.fence);
    await cLease.release();
    await waiting;
    expect(bLease!.fence).toBeGreaterThan(cLease.fence);
  });
});
