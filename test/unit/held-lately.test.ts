/** The locks a manager found held lately: each for 10 s from its latest mark, and never more than 1,024 of them. */
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { HeldLately } from '../../src/wait/held-lately.js';

const FOR_MS = 10_000;

afterEach(() => {
  vi.useRealTimers();
});

describe('HeldLately', () => {
  it('answers has(name) true exactly while less than 10 s passed since the latest mark of name (seeded)', () => {
    const op = fc.oneof(
      fc.record({ mark: fc.constantFrom('a', 'b', 'c', 'd') }),
      fc.record({ has: fc.constantFrom('a', 'b', 'c', 'd', 'never') }),
      fc.record({ advance: fc.oneof(fc.integer({ min: 0, max: 3_000 }), fc.constantFrom(FOR_MS - 1, FOR_MS, FOR_MS + 1)) }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 60 }), (ops) => {
        vi.useFakeTimers({ toFake: ['performance'] });
        try {
          const lately = new HeldLately();
          const markedAt = new Map<string, number>();
          for (const o of ops) {
            if ('mark' in o) {
              lately.mark(o.mark);
              markedAt.set(o.mark, performance.now());
            } else if ('advance' in o) {
              vi.advanceTimersByTime(o.advance);
            } else {
              const at = markedAt.get(o.has);
              expect(lately.has(o.has)).toBe(at !== undefined && performance.now() - at < FOR_MS);
            }
          }
        } finally {
          vi.useRealTimers();
        }
      }),
      { seed: 20261127, numRuns: 500 },
    );
  });

  it('holds at most 1,024 names: a new name past them empties the memory first (the others cost one round trip, nothing else)', () => {
    const lately = new HeldLately();
    for (let i = 0; i < 1024; i++) lately.mark(`lock-${i}`);
    expect(lately.has('lock-0')).toBe(true);
    expect(lately.has('lock-1023')).toBe(true);
    lately.mark('lock-0'); // marked again: no new name, nothing forgotten
    expect(lately.has('lock-1023')).toBe(true);
    lately.mark('one-more');
    expect(lately.has('one-more')).toBe(true);
    expect(lately.has('lock-0')).toBe(false);
    expect(lately.has('lock-1023')).toBe(false);
  });
});
