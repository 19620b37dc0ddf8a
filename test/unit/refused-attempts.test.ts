/**
 * A waiter whose attempts Redis Cluster refuses for where the keys are (TRYAGAIN while the lock's
 * slot migrates, or the client's "Too many Cluster redirections"), on the in-memory backend
 * wrapped so that its acquires are refused while `refusing` is set: the wait goes on until its
 * deadline, no refused attempt is given back, and a one-shot attempt still fails with the refusal.
 */
import { describe, expect, it, vi } from 'vitest';
import type { Backend } from '../../src/backend/backend.js';
import { BackendError } from '../../src/errors.js';
import { createMemoryStore } from '../../src/index.js';
import { memoryManagers } from '../helpers/memory-managers.js';

const refusal = (): BackendError =>
  new BackendError('acquire', 'Too many Cluster redirections. Last error: ReplyError: TRYAGAIN Multiple keys request during rehashing of slot');

/** What the wrapped backend saw, and the switch that makes it refuse acquires. */
const state = { refusing: false, refused: 0, releasedTokens: [] as string[] };

vi.mock('../../src/backend/choose.js', async (importOriginal) =>
  (await import('../helpers/wrapped-backend.js')).wrapChosenBackend(await importOriginal<typeof import('../../src/backend/choose.js')>(), (backend) => ({
    acquire(...call: Parameters<Backend['acquire']>) {
      if (state.refusing) {
        state.refused++;
        return Promise.reject(refusal());
      }
      return backend.acquire(...call);
    },
    release(keys, token, handOff) {
      state.releasedTokens.push(token);
      return backend.release(keys, token, handOff);
    },
  })),
);

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const manager = memoryManagers(() => {
  state.refusing = false;
  state.refused = 0;
  state.releasedTokens = [];
});

describe('a waiter whose attempts are refused (a Cluster slot that migrates)', () => {
  it('keeps waiting through the refusals, gives none of them back, and gets the lock once they stop', async () => {
    const store = createMemoryStore();
    const [a, b] = [manager(store), manager(store)];
    const held = await a.acquire('job', { ttl: 5000 });
    state.refusing = true;
    let ended: unknown;
    const waiting = b.acquire('job', { ttl: 5000, wait: 10_000 }).catch((error: unknown) => {
      ended = error;
      throw error;
    });
    await sleep(400);
    expect(ended).toBeUndefined();
    expect(state.refused).toBeGreaterThanOrEqual(3); // tried again, with a backoff: 25, 50, 100, 200 ms…
    expect(state.refused).toBeLessThan(20);
    expect(state.releasedTokens).toEqual([]); // no give-back of a refused attempt
    state.refusing = false;
    await held.release();
    const next = await waiting;
    expect(next.fence).toBeGreaterThan(held.fence);
    expect(state.releasedTokens).toEqual([held.token]);
    await next.release();
  });

  it('ends at its deadline, not before, with the refusal', async () => {
    const b = manager();
    state.refusing = true;
    const started = performance.now();
    const error = await b.acquire('job', { wait: 600 }).catch((e: unknown) => e);
    const waited = performance.now() - started;
    expect(error).toBeInstanceOf(BackendError);
    expect((error as BackendError).code).toBe('BACKEND_ERROR');
    expect((error as Error).message).toMatch(/TRYAGAIN/);
    expect(waited).toBeGreaterThanOrEqual(590);
    expect(waited).toBeLessThan(1500);
  });

  it('a wait of 0 and tryAcquire make one attempt and fail with the refusal, as before', async () => {
    const b = manager();
    state.refusing = true;
    await expect(b.acquire('job', { wait: 0 })).rejects.toThrow(/TRYAGAIN/);
    expect(state.refused).toBe(1);
    await expect(b.tryAcquire('job')).rejects.toThrow(/TRYAGAIN/);
    expect(state.refused).toBe(2);
  });
});
