/**
 * The one-step attempt of a multi-lock (multi-acquire.lua, all keys in one script) ends as a single
 * attempt does: at its wait (plus the attempt grace) or min(ttl, 2 s) for a try, at the caller's
 * abort and at the manager's close(), against a Redis that accepts the connection and never
 * answers; and a multi-lock won while the manager closes is not handed to the caller.
 */
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { createLocks, createMemoryStore, LockAbortedError, UnreachableError, type Locks } from '../../src/index.js';
import { blackHole, SLACK } from '../helpers/redis-down-suite.js';

/** The attempt grace: how long past its wait an attempt in flight may wait for its reply, ms (src/wait/attempt.ts). */
const ATTEMPT_GRACE = 250;

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((c) => c().catch(() => {})));
});

/** A manager on a server that never answers (ioredis at its defaults). */
async function hungManager(): Promise<Locks> {
  const hole = await blackHole();
  const redis = new Redis(hole.port, '127.0.0.1');
  redis.on('error', () => {});
  const locks = createLocks({ redis });
  cleanups.push(async () => {
    await locks.close();
    redis.disconnect();
    await hole.close();
  });
  return locks;
}

/** How long `call` took to settle, and its error. */
async function timed(call: Promise<unknown>): Promise<{ error: unknown; ms: number }> {
  const t = performance.now();
  const error = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  return { error, ms: performance.now() - t };
}

describe('a multi-lock against a Redis that never answers', () => {
  it('acquireAll rejects with UNREACHABLE within its wait plus the attempt grace', async () => {
    const locks = await hungManager();
    const { error, ms } = await timed(locks.acquireAll(['a', 'b'], { wait: 200 }));
    expect(error).toBeInstanceOf(UnreachableError);
    expect((error as Error).message).toMatch(/locks "a, b"/);
    expect(ms).toBeLessThan(200 + ATTEMPT_GRACE + SLACK);
  });

  it('tryAcquireAll rejects with UNREACHABLE within min(ttl, 2 s)', async () => {
    const locks = await hungManager();
    const { error, ms } = await timed(locks.tryAcquireAll(['a', 'b'], { ttl: 500 }));
    expect(error).toBeInstanceOf(UnreachableError);
    expect(ms).toBeLessThan(500 + SLACK);
  });

  it('an abort ends the attempt at once with the signal\'s reason', async () => {
    const locks = await hungManager();
    const controller = new AbortController();
    const waiting = timed(locks.acquireAll(['a', 'b'], { wait: Infinity, signal: controller.signal }));
    const reason = new Error('caller gave up');
    setTimeout(() => controller.abort(reason), 50);
    const { error, ms } = await waiting;
    expect(error).toBe(reason);
    expect(ms).toBeLessThan(50 + SLACK);
  });

  it('close() ends the attempt at once with a LockAbortedError', async () => {
    const locks = await hungManager();
    const waiting = timed(locks.withLocks(['a', 'b'], { wait: 10_000 }, () => 'ran'));
    setTimeout(() => void locks.close(), 50);
    const { error, ms } = await waiting;
    expect(error).toBeInstanceOf(LockAbortedError);
    expect(ms).toBeLessThan(50 + SLACK);
  });
});

describe('a multi-lock won in one step while the manager closes', () => {
  it('is not handed to the caller: withLocks rejects without running fn, and the keys are free', async () => {
    const store = createMemoryStore();
    const locks = createLocks({ memory: store });
    let ran = false;
    const taking = locks.withLocks(['a', 'b'], () => {
      ran = true;
    });
    const closing = locks.close();
    await expect(taking).rejects.toBeInstanceOf(LockAbortedError);
    await closing;
    expect(ran).toBe(false);
    const other = createLocks({ memory: store });
    const both = await other.tryAcquireAll(['a', 'b']);
    expect(both).not.toBeNull();
    await other.close();
  });
});
