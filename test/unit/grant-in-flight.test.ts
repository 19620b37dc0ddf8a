/**
 * A grant that reaches a waiter while its attempt is still in flight: the release that granted the
 * lock ran after that attempt (which found the lock held and queued the waiter), so the waiter
 * takes the lock from the grant when the attempt's busy reply comes, without another attempt.
 * (Between processes the grant's message and the attempt's reply can arrive together; the waiter
 * used to make one more round trip for a lock that was already its own.) On the in-memory backend
 * (a product feature, not a mock of Redis), wrapped so that one queued attempt's reply is held
 * back until the test lets it go.
 */
import { describe, expect, it, vi } from 'vitest';
import { createMemoryStore } from '../../src/index.js';
import { memoryManagers } from '../helpers/memory-managers.js';
import { openGate } from '../helpers/wrapped-backend.js';

/** `holdNext`: the next attempt that queues is run, then its reply waits for `gate`; `ran` sees it ran. */
const state = openGate();

vi.mock('../../src/backend/choose.js', async (importOriginal) => {
  const { wrapChosenBackend, gatedAcquire } = await import('../helpers/wrapped-backend.js');
  return wrapChosenBackend(await importOriginal<typeof import('../../src/backend/choose.js')>(), (backend) => ({ acquire: gatedAcquire(backend, state) }));
});

const manager = memoryManagers(() => {
  Object.assign(state, openGate());
});

/** Every promise job queued by now has run (the in-memory inbox delivers in one). */
const settled = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('a grant that arrives while the waiter has an attempt in flight', () => {
  it('is taken when the busy reply comes: no further attempt, the lease holds the lock', async () => {
    const store = createMemoryStore();
    const [a, b] = [manager(store), manager(store)];
    const held = await a.acquire('job', { ttl: 5000 });
    let open!: () => void;
    state.gate = new Promise<void>((resolve) => (open = resolve));
    const ran = new Promise<void>((resolve) => (state.ran = resolve));
    state.holdNext = true;
    const waiting = b.acquire('job', { ttl: 5000, wait: 5000 });
    await ran; // its queued attempt found the lock held; the reply is held back
    const attemptsBefore = state.attempts;
    await held.release(); // grants the lock to the queued waiter, and tells its inbox
    await settled(); // the grant has reached the waiter, whose attempt is still in flight
    open();
    const lease = await waiting;
    expect(state.attempts).toBe(attemptsBefore); // no attempt after the busy reply
    expect(lease.fence).toBeGreaterThan(held.fence);
    expect((await b.inspect('job')).fence).toBe(lease.fence); // the lock is the waiter's, with the grant's fence
    await lease.release(); // held until now: no LeaseLostError
    expect((await b.inspect('job')).held).toBe(false);
  });
});
