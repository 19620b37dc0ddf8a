/**
 * LateAcquires: a give-back of a token whose acquire timed out in a client that may still send it
 * is repeated once those late sends are over, unless an acquire of the token is sent meanwhile.
 */
import { describe, expect, it, vi } from 'vitest';
import { LateAcquires, type GiveBack } from '../../src/backend/late-acquires.js';
import { lockKeys, type LockKeys } from '../../src/keys.js';

const keys = lockKeys('t:', 'job');

function recorder(): GiveBack & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    leave: (_keys: LockKeys, member: string, token: string) => {
      calls.push(`leave ${member} ${token}`);
      return Promise.resolve(false);
    },
    release: (_keys: LockKeys, token: string) => {
      calls.push(`release ${token}`);
      return Promise.resolve('gone');
    },
  };
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe('LateAcquires', () => {
  it('repeats a give-back once the late sends are over: the leave, then the release, of that token only, once', async () => {
    const late = new LateAcquires();
    const backend = recorder();
    late.note('tok', 'm:1', 80);
    late.gaveBack(keys, 'tok', backend);
    late.gaveBack(keys, 'other', backend); // never timed out: nothing to repeat
    expect(late.pending).toBe(1);
    await sleep(20);
    expect(backend.calls).toEqual([]);
    await vi.waitFor(() => expect(backend.calls).toEqual(['leave m:1 tok', 'release tok']), { timeout: 500, interval: 10 });
    await sleep(120);
    expect(backend.calls).toHaveLength(2);
    expect(late.pending).toBe(0);
  });

  it('calls the repeat off when an acquire of the token is sent, and schedules it again at the next give-back', async () => {
    const late = new LateAcquires();
    const backend = recorder();
    late.note('tok', undefined, 100);
    late.gaveBack(keys, 'tok', backend); // a win too late to be of use, given back...
    late.sending('tok'); // ...and the waiter tries again with the same token
    expect(late.pending).toBe(0);
    await sleep(150);
    expect(backend.calls).toEqual([]); // the lease that attempt may win is not deleted
    late.note('tok', undefined, 100); // it timed out too
    late.gaveBack(keys, 'tok', backend); // the waiter left
    await vi.waitFor(() => expect(backend.calls).toEqual(['release tok']), { timeout: 500, interval: 10 });
  });

  it('repeats nothing when the give-back comes after the late sends are over, or the client sends nothing late', async () => {
    const late = new LateAcquires();
    const backend = recorder();
    late.note('tok', undefined, 30);
    late.note('never', undefined, 0);
    await sleep(50);
    late.gaveBack(keys, 'tok', backend);
    late.gaveBack(keys, 'never', backend);
    expect(late.pending).toBe(0);
    await sleep(50);
    expect(backend.calls).toEqual([]);
  });
});
