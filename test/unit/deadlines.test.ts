/** One timer for many deadlines: each expires once it has passed, in deadline order, and a deleted one never does. */
import { describe, expect, it } from 'vitest';
import { Deadlines, type Deadline } from '../../src/deadlines.js';

/** A deadline `ms` from now whose expiry is recorded in `log` and resolves the returned promise. */
function deadlineIn(ms: number, name: string, log: string[]): { deadline: Deadline; expired: Promise<number> } {
  let resolve!: (at: number) => void;
  const expired = new Promise<number>((r) => (resolve = r));
  const deadline: Deadline = {
    at: performance.now() + ms,
    expire: (now) => {
      log.push(name);
      resolve(now);
    },
  };
  return { deadline, expired };
}

describe('Deadlines', () => {
  it('expires each deadline once it has passed, an earlier one added later first, and never a deleted one', async () => {
    const deadlines = new Deadlines();
    const log: string[] = [];
    const late = deadlineIn(60, 'late', log);
    const early = deadlineIn(10, 'early', log);
    const dropped = deadlineIn(5, 'dropped', log);
    deadlines.watch(late.deadline);
    deadlines.watch(early.deadline);
    deadlines.watch(dropped.deadline);
    deadlines.delete(dropped.deadline);
    const earlyAt = await early.expired;
    expect(earlyAt).toBeGreaterThanOrEqual(early.deadline.at);
    expect(log).toEqual(['early']);
    const lateAt = await late.expired;
    expect(lateAt).toBeGreaterThanOrEqual(late.deadline.at);
    expect(log).toEqual(['early', 'late']);
  });

  it('expires a deadline watched after the timer fired for an earlier one', async () => {
    const deadlines = new Deadlines();
    const log: string[] = [];
    const first = deadlineIn(5, 'first', log);
    deadlines.watch(first.deadline);
    await first.expired;
    const second = deadlineIn(5, 'second', log);
    deadlines.watch(second.deadline);
    await second.expired;
    expect(log).toEqual(['first', 'second']);
  });
});
