/**
 * What latchkey does while a Redis Cluster slot migrates, without a cluster: which errors count
 * as a refusal for where the keys are, the release that falls back to the lock key alone, and the
 * waiter's backoff after a refusal. (test/integration/redis-cluster-migration.test.ts runs them
 * on a real cluster.)
 */
import { describe, expect, it } from 'vitest';
import type { OwnershipReply, ReleaseReply } from '../../src/backend/backend.js';
import { releaseOrFallBack } from '../../src/backend/cluster-migration.js';
import { isSlotRefusal } from '../../src/client/script-client.js';
import { BackendError, UnreachableError } from '../../src/errors.js';
import { DEFAULT_TUNING, refusalDelay } from '../../src/wait/strategy.js';

const TRYAGAIN = 'TRYAGAIN Multiple keys request during rehashing of slot';

/** A promise settled from outside. */
function later<T>(): { promise: Promise<T>; resolve: (value: T) => void; reject: (error: unknown) => void } {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

const tick = (ms = 0): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe('isSlotRefusal', () => {
  it('knows TRYAGAIN and the drivers\' "Too many Cluster redirections", in the message or a cause', () => {
    expect(isSlotRefusal(new Error(TRYAGAIN))).toBe(true); // node-redis
    expect(isSlotRefusal(new Error(`Too many Cluster redirections. Last error: ReplyError: ${TRYAGAIN}`))).toBe(true); // ioredis
    expect(isSlotRefusal(new Error('Too many Cluster redirections'))).toBe(true); // node-redis MaxCommandRedirectionsError
    expect(isSlotRefusal(new BackendError('extend', 'x', { cause: new Error(TRYAGAIN) }))).toBe(true);
  });

  it('not other errors, nor an UnreachableError whose last connection error names one', () => {
    expect(isSlotRefusal(new Error('NOSCRIPT No matching script'))).toBe(false);
    expect(isSlotRefusal(new Error('WRONGTYPE Operation against a key holding the wrong kind of value'))).toBe(false);
    expect(isSlotRefusal(new Error('CLUSTERDOWN The cluster is down'))).toBe(false);
    expect(isSlotRefusal('TRYAGAIN')).toBe(false);
    expect(isSlotRefusal(new UnreachableError('acquire', 'an attempt', undefined, 10, new Error(TRYAGAIN)))).toBe(false);
    // ioredis gave up after a closed connection: the command may have been written and run.
    expect(isSlotRefusal(new Error('Too many Cluster redirections. Last error: Error: Connection is closed.'))).toBe(false);
    expect(isSlotRefusal(new Error('Too many Cluster redirections. Last error: ReplyError: MOVED 3999 127.0.0.1:6381'))).toBe(true);
    // A node the slot moved to answered NOSCRIPT: nothing ran (seen during a migration in CI).
    expect(isSlotRefusal(new Error('Too many Cluster redirections. Last error: ReplyError: NOSCRIPT No matching script. Please use EVAL.'))).toBe(true);
    expect(isSlotRefusal(new Error('Too many Cluster redirections. Last error: Error: read ECONNRESET'))).toBe(false);
  });
});

describe('releaseOrFallBack', () => {
  it('answers with the full release when it comes in time, without falling back', async () => {
    let fellBack = 0;
    const reply = await releaseOrFallBack(Promise.resolve({ handedOff: 7 }), async () => (fellBack++, 'ok'), 50);
    expect(reply).toEqual({ handedOff: 7 });
    await tick(80);
    expect(fellBack).toBe(0);
  });

  it('falls back at once when the full release is refused (node-redis: TRYAGAIN without retrying)', async () => {
    const started = performance.now();
    const reply = await releaseOrFallBack(Promise.reject(new BackendError('release', TRYAGAIN)), async () => 'ok', 10_000);
    expect(reply).toBe('ok');
    expect(performance.now() - started).toBeLessThan(1000);
  });

  it('falls back after `after` ms while the client still retries the full release (ioredis), and a fallback that freed the lock answers', async () => {
    const full = later<ReleaseReply>();
    let fellBackAt = 0;
    const started = performance.now();
    const reply = await releaseOrFallBack(full.promise, async () => ((fellBackAt = performance.now() - started), 'ok'), 60);
    expect(reply).toBe('ok');
    expect(fellBackAt).toBeGreaterThanOrEqual(55);
    full.reject(new Error(`Too many Cluster redirections. Last error: ReplyError: ${TRYAGAIN}`)); // later: nothing to settle
  });

  it('a fallback that finds the lock not ours leaves the answer to the full release (which may have run first)', async () => {
    const full = later<ReleaseReply>();
    const releasing = releaseOrFallBack(full.promise, async (): Promise<OwnershipReply> => 'taken', 20);
    await tick(60);
    full.resolve({ handedOff: 9 });
    expect(await releasing).toEqual({ handedOff: 9 });
  });

  it('when the full release is refused, what the fallback found is the answer', async () => {
    const full = later<ReleaseReply>();
    const releasing = releaseOrFallBack(full.promise, async (): Promise<OwnershipReply> => 'gone', 20);
    await tick(60);
    full.reject(new BackendError('release', TRYAGAIN));
    expect(await releasing).toBe('gone');
  });

  it('any other failure of the full release fails it, as before (no fallback started for it)', async () => {
    let fellBack = 0;
    const error = new BackendError('release', 'connect ECONNREFUSED');
    await expect(releaseOrFallBack(Promise.reject(error), async () => (fellBack++, 'ok'), 10_000)).rejects.toBe(error);
    expect(fellBack).toBe(0);
  });

  it('a refused release whose fallback fails too fails with the refusal', async () => {
    const refusal = new BackendError('release', TRYAGAIN);
    await expect(releaseOrFallBack(Promise.reject(refusal), () => Promise.reject(new Error('socket closed')), 10_000)).rejects.toBe(refusal);
  });
});

describe('refusalDelay', () => {
  it('backs off from 25 ms up to the backoff cap, with jitter in the upper half', () => {
    const low = (n: number): number => refusalDelay(n, DEFAULT_TUNING, () => 0);
    const high = (n: number): number => refusalDelay(n, DEFAULT_TUNING, () => 1);
    expect([1, 2, 3, 4, 5, 6].map(high)).toEqual([25, 50, 100, 200, 250, 250]);
    expect([1, 2, 3, 4, 5, 6].map(low)).toEqual([13, 25, 50, 100, 125, 125]);
  });
});
