/**
 * A wake-up that reaches a waiter during a back-off (a refused attempt's, as while a Cluster slot
 * migrates; a Redlock split vote's is the same sleep) is answered by the attempt after the back-off:
 * when that attempt finds the lock held, the waiter sleeps, rather than taking the stale wake-up
 * for a new one and asking again at once. On the in-memory backend wrapped so that one attempt is
 * refused and the inbox's messages can be sent by the test (see wrapped-backend.ts).
 */
import { describe, expect, it, vi } from 'vitest';
import type { Backend } from '../../src/backend/backend.js';
import { BackendError } from '../../src/errors.js';
import { createMemoryStore } from '../../src/index.js';
import { memoryManagers } from '../helpers/memory-managers.js';

interface State {
  /** Refuse the next attempt, then tell `refused`. */
  refuseNext: boolean;
  refused: () => void;
  /** Attempts that queue, with the waiter's name: each tells `queued`. */
  attempts: string[];
  queued: () => void;
  /** The waiting manager's inbox listener: what a release's message would reach. */
  deliver: ((member?: string, fence?: number) => void) | undefined;
}

const state: State = { refuseNext: false, refused: () => {}, attempts: [], queued: () => {}, deliver: undefined };

vi.mock('../../src/backend/choose.js', async (importOriginal) =>
  (await import('../helpers/wrapped-backend.js')).wrapChosenBackend(await importOriginal<typeof import('../../src/backend/choose.js')>(), (backend) => ({
    async acquire(...call: Parameters<Backend['acquire']>) {
      const queue = call[3];
      if (queue && state.refuseNext) {
        state.refuseNext = false;
        state.refused();
        throw new BackendError('acquire', 'Too many Cluster redirections. Last error: ReplyError: TRYAGAIN Multiple keys request during rehashing of slot');
      }
      const reply = await backend.acquire(...call);
      if (queue) {
        state.attempts.push(queue.member);
        state.queued();
      }
      return reply;
    },
    watchInbox(managerId, listener) {
      state.deliver = listener;
      return backend.watchInbox(managerId, listener);
    },
  })),
);

// A long recheck: once the lock is found held, only a message (or the holder's TTL) ends the sleep.
const manager = memoryManagers(() => {
  state.refuseNext = false;
  state.attempts = [];
  state.deliver = undefined;
}, 60_000);

/** Resolves at the next call of `state[name]`. */
const next = (name: 'refused' | 'queued'): Promise<void> => new Promise((resolve) => (state[name] = resolve));
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe('a wake-up during a back-off', () => {
  it('is answered by the attempt after the back-off: found busy, the waiter sleeps', async () => {
    const store = createMemoryStore();
    const [a, b] = [manager(store), manager(store)];
    const held = await a.acquire('job', { ttl: 10_000 });
    const queued = next('queued');
    const waiting = b.acquire('job', { ttl: 5000, wait: 10_000 });
    await queued; // b is in the queue, its inbox listening: asleep until a message
    const member = state.attempts[0]!;
    expect(state.deliver).toBeDefined();

    // A wake-up: b asks again, and that attempt is refused (a slot that migrates): a back-off.
    state.refuseNext = true;
    const refused = next('refused');
    state.deliver!(member, 0);
    await refused;
    // Another wake-up while it backs off (a release on a Redlock node, a leave ahead of it).
    await sleep(5);
    state.deliver!(member, 0);

    // The attempt after the back-off finds the lock held: b sleeps until a grant or the holder's TTL.
    const after = state.attempts.length;
    await next('queued');
    await sleep(300);
    expect(state.attempts.length).toBe(after + 1);

    await held.release();
    const lease = await waiting;
    expect(lease.fence).toBeGreaterThan(held.fence);
    await lease.release();
  });
});
