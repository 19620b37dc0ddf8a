/** The arithmetic of leases and waiting, as pure functions. */
import { describe, expect, it } from 'vitest';
import { backoffDelay, driftFor, validUntil } from '../../src/clock.js';
import { DEFAULT_TUNING, nextDelay } from '../../src/wait/strategy.js';

describe('validity', () => {
  it('is counted from the send time, minus 1% of the TTL plus 2 ms', () => {
    expect(driftFor(10_000, 0.01)).toBe(102);
    expect(validUntil(500, 10_000, 0.01)).toBe(500 + 10_000 - 102);
    expect(driftFor(10, 0.01)).toBe(3);
  });
});

describe('backoff', () => {
  it('draws from [0, min(cap, base * 2^attempt)] (full jitter)', () => {
    expect(backoffDelay(0, 5, 250, () => 0.999)).toBe(5);
    expect(backoffDelay(3, 5, 250, () => 0.999)).toBe(40);
    expect(backoffDelay(20, 5, 250, () => 0.999)).toBe(250);
    expect(backoffDelay(3, 5, 250, () => 0)).toBe(0);
    expect(backoffDelay(1e6, 5, 250, () => 0.5)).toBe(125);
  });
});

describe('the next delay of a waiter', () => {
  it('never sleeps past the holder TTL', () => {
    expect(nextDelay('notify', 0, 30, DEFAULT_TUNING)).toBe(31);
    expect(nextDelay('notify', 0, 60_000, DEFAULT_TUNING)).toBe(DEFAULT_TUNING.recheck);
    expect(nextDelay('notify', 0, -1, DEFAULT_TUNING)).toBe(DEFAULT_TUNING.recheck);
    for (let attempt = 0; attempt < 40; attempt++) {
      expect(nextDelay('backoff', attempt, 20, DEFAULT_TUNING)).toBeLessThanOrEqual(21);
      expect(nextDelay('backoff', attempt, -1, DEFAULT_TUNING)).toBeLessThanOrEqual(DEFAULT_TUNING.backoffCap);
    }
  });
});
