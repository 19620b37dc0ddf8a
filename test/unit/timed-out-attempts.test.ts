/**
 * A waiter whose attempts the client's own timeout ends (ioredis `commandTimeout`: "Command timed
 * out"; GLIDE `requestTimeout`: TimeoutError), on the in-memory backend wrapped so that, while
 * `timingOut` is set, each acquire runs (its outcome is real) but its caller gets the client's
 * timeout instead of the reply: the wait goes on until its deadline with the same token, no
 * timed-out attempt is given back while it does, and a wait that ends without the lock gives its
 * token back, which frees a lock a timed-out attempt took.
 */
import { TimeoutError as GlideTimeoutError } from '@valkey/valkey-glide';
import { CommandTimeoutDuringMaintenanceError, ConnectionTimeoutError, TimeoutError as NodeRedisTimeoutError } from 'redis';
import { describe, expect, it, vi } from 'vitest';
import type { Backend } from '../../src/backend/backend.js';
import { isClientTimeout } from '../../src/client/script-client.js';
import { BackendError, UnreachableError } from '../../src/errors.js';
import { createMemoryStore } from '../../src/index.js';
import { memoryManagers } from '../helpers/memory-managers.js';

/** What the wrapped backend saw, and the switch that makes acquires time out in the "client". */
const state = { timingOut: false, timedOut: 0, tokens: new Set<string>(), releasedTokens: [] as string[] };

vi.mock('../../src/backend/choose.js', async (importOriginal) =>
  (await import('../helpers/wrapped-backend.js')).wrapChosenBackend(await importOriginal<typeof import('../../src/backend/choose.js')>(), (backend) => ({
    acquire(...call: Parameters<Backend['acquire']>) {
      const ran = backend.acquire(...call);
      if (!state.timingOut) return ran;
      state.timedOut++;
      state.tokens.add(call[1]);
      // It ran; its reply is lost to the client's timeout (wrapped as runScript wraps it).
      return ran.then(() => Promise.reject(new BackendError('acquire', 'Command timed out', { cause: new Error('Command timed out') })));
    },
    release(keys, token, handOff) {
      state.releasedTokens.push(token);
      return backend.release(keys, token, handOff);
    },
  })),
);

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const manager = memoryManagers(() => {
  state.timingOut = false;
  state.timedOut = 0;
  state.tokens.clear();
  state.releasedTokens = [];
});

describe('isClientTimeout', () => {
  it("knows ioredis's, GLIDE's and node-redis's timeouts, through latchkey's wrapping, and nothing else", () => {
    expect(isClientTimeout(new Error('Command timed out'))).toBe(true);
    expect(isClientTimeout(new BackendError('acquire', 'Command timed out', { cause: new Error('Command timed out') }))).toBe(true);
    expect(isClientTimeout(new BackendError('acquire', 'timed out', { cause: new GlideTimeoutError('timed out') }))).toBe(true);
    expect(isClientTimeout(new BackendError('acquire', '', { cause: new NodeRedisTimeoutError() }))).toBe(true);
    expect(isClientTimeout(new CommandTimeoutDuringMaintenanceError(100))).toBe(true);
    expect(isClientTimeout(new ConnectionTimeoutError())).toBe(false);
    expect(isClientTimeout(new UnreachableError('acquire', 'an attempt', undefined, 10, new Error('Command timed out')))).toBe(false);
    expect(isClientTimeout(new DOMException('The operation was aborted due to timeout', 'TimeoutError'))).toBe(false);
    expect(isClientTimeout(new Error('Connection is closed.'))).toBe(false);
  });
});

describe('a waiter whose attempts time out in the client', () => {
  it('keeps waiting with the same token, gives none of them back, and gets the lock once they stop timing out', async () => {
    const store = createMemoryStore();
    const [a, b] = [manager(store), manager(store)];
    const held = await a.acquire('job', { ttl: 5000 });
    state.timingOut = true;
    let ended: unknown;
    const waiting = b.acquire('job', { ttl: 5000, wait: 10_000 }).catch((error: unknown) => {
      ended = error;
      throw error;
    });
    await sleep(400);
    expect(ended).toBeUndefined();
    expect(state.timedOut).toBeGreaterThanOrEqual(3); // tried again, with a backoff
    expect(state.timedOut).toBeLessThan(20);
    expect(state.tokens.size).toBe(1); // one token for the whole wait
    expect(state.releasedTokens).toEqual([]);
    state.timingOut = false;
    await held.release();
    const next = await waiting;
    expect(state.tokens).toEqual(new Set([next.token]));
    expect(next.fence).toBeGreaterThan(held.fence);
    await next.release();
  });

  it('a win whose reply timed out is refreshed by the next attempt, not given back: the caller gets that lease', async () => {
    const store = createMemoryStore();
    const b = manager(store);
    state.timingOut = true;
    const waiting = b.acquire('job', { ttl: 5000, wait: 10_000 });
    await sleep(150); // the first attempt won the free lock; its reply was lost
    expect((await b.inspect('job')).held).toBe(true);
    state.timingOut = false;
    const lease = await waiting;
    expect(state.tokens).toEqual(new Set([lease.token]));
    expect(state.releasedTokens).toEqual([]);
    expect((await b.inspect('job')).fence).toBe(lease.fence); // the same fence, answered again
    await lease.release();
  });

  it('ends at its deadline, not before, as unanswered, and gives back the lock a timed-out attempt took', async () => {
    const store = createMemoryStore();
    const b = manager(store);
    state.timingOut = true;
    const started = performance.now();
    const error = await b.acquire('job', { ttl: 30_000, wait: 600 }).catch((e: unknown) => e);
    const waited = performance.now() - started;
    expect(error).toBeInstanceOf(UnreachableError);
    expect((error as UnreachableError).code).toBe('UNREACHABLE');
    expect((error as Error).message).toMatch(/Command timed out/);
    expect(waited).toBeGreaterThanOrEqual(590);
    expect(waited).toBeLessThan(1500);
    await vi.waitFor(() => expect(state.releasedTokens).toEqual([...state.tokens]));
    state.timingOut = false;
    const other = manager(store);
    const next = await other.acquire('job', { wait: 0 }); // free: not held until the 30 s TTL
    await next.release();
  });

  it('after a reply that found the lock held, ends with a LockTimeoutError, and leaves no queue entry', async () => {
    const store = createMemoryStore();
    const [a, b] = [manager(store), manager(store)];
    const held = await a.acquire('job', { ttl: 5000 });
    const waiting = b.acquire('job', { ttl: 5000, wait: 800 }).catch((e: unknown) => e);
    await vi.waitFor(async () => expect((await a.inspect('job')).queued).toBe(1));
    state.timingOut = true;
    const error = await waiting;
    expect((error as Error).name).toBe('LockTimeoutError');
    state.timingOut = false;
    await vi.waitFor(async () => expect((await a.inspect('job')).queued).toBe(0));
    expect(state.releasedTokens).toHaveLength(1); // the waiter's give-back
    await held.release();
  });
});
