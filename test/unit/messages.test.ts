/** Error messages tell a new user what happened in their own terms: no misleading counts, no float noise. */
import { describe, expect, it } from 'vitest';
import { createLocks, InvalidOptionError, LockTimeoutError } from '../../src/index.js';

async function rejection(run: () => Promise<unknown>): Promise<Error> {
  try {
    await run();
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a rejection');
}

describe('LockTimeoutError', () => {
  it('says the lock is held by another lease of this manager, not by "another owner" after "0 attempts"', async () => {
    const locks = createLocks({ holder: 'api-1' });
    const lease = await locks.acquire('orders:1');
    const error = await rejection(() => locks.acquire('orders:1', { wait: 30 }));
    expect(error).toBeInstanceOf(LockTimeoutError);
    expect(error).toMatchObject({ heldHere: true, attempts: 0, holder: 'api-1' });
    expect(error.message).toMatch(/waited in this manager's queue; Redis was not asked\); it is still held by another lease of this same manager \(in this process, recorded as "api-1"\)/);
    expect(error.message).not.toMatch(/0 attempts|another owner/);
    await lease.release();
    await locks.close();
  });

  it('gives how long it waited rounded to 0.1 ms, in the field and the message', async () => {
    const locks = createLocks();
    const lease = await locks.acquire('orders:2');
    const error = (await rejection(() => locks.acquire('orders:2', { wait: 25 }))) as LockTimeoutError;
    // (libuv counts its loop's time in whole ms: a 25 ms timer may fire up to 1 ms early.)
    expect(error.waited).toBeGreaterThanOrEqual(24);
    expect(Math.round(error.waited * 10)).toBe(error.waited * 10);
    expect(error.message).toMatch(/Timed out after \d+ ms/);
    await lease.release();
    await locks.close();
  });

  it('keeps counting attempts when Redis (here the store) was asked', () => {
    const error = new LockTimeoutError('k', 300.5638410000001, 3, undefined, undefined);
    expect(error.waited).toBe(300.6);
    expect(error.heldHere).toBe(false);
    expect(error.message).toMatch(/Timed out after 301 ms waiting for lock "k" \(3 attempts\); it is still held by another owner\./);
  });
});

describe('withLock with the callback in the key\'s place', () => {
  const locks = createLocks();

  it('says the first argument is the lock\'s name, not that a function is missing', async () => {
    const error = await rejection(() => locks.withLock((async () => 1) as never, undefined as never));
    expect(error).toBeInstanceOf(InvalidOptionError);
    expect(error).toMatchObject({ option: 'key' });
    expect(error.message).toMatch(/expected the lock's name first: withLock\(key, fn\) takes it first and the function after it, got a function in its place/);
  });

  it('says the same for withLocks', async () => {
    const error = await rejection(() => locks.withLocks((async () => 1) as never, undefined as never));
    expect(error).toMatchObject({ option: 'keys' });
    expect(error.message).toMatch(/withLocks\(keys, fn\) takes it first/);
  });
});
