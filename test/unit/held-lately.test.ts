/** The locks a manager found held lately: each for 10 s from its latest mark, and never more than 1,024 of them. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { HeldLately } from '../../src/wait/held-lately.js';

const FOR_MS = 10_000;

describe('HeldLately', () => {
  it('answers has(name, at) true exactly while less than 10 s passed from the latest mark of name to at (seeded)', () => {
    const op = fc.oneof(
      fc.record({ mark: fc.constantFrom('a', 'b', 'c', 'd') }),
      fc.record({ has: fc.constantFrom('a', 'b', 'c', 'd', 'never') }),
      fc.record({ advance: fc.oneof(fc.integer({ min: 0, max: 3_000 }), fc.constantFrom(FOR_MS - 1, FOR_MS, FOR_MS + 1)) }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 60 }), (ops) => {
        const lately = new HeldLately();
        const markedAt = new Map<string, number>();
        let clock = 1000.5; // monotonic ms, as the callers give it
        for (const o of ops) {
          if ('mark' in o) {
            lately.mark(o.mark, clock);
            markedAt.set(o.mark, clock);
          } else if ('advance' in o) {
            clock += o.advance;
          } else {
            const at = markedAt.get(o.has);
            expect(lately.has(o.has, clock)).toBe(at !== undefined && clock - at < FOR_MS);
          }
        }
      }),
      { seed: 20261127, numRuns: 500 },
    );
  });

  it('holds at most 1,024 names: a new name past them empties the memory first (the others cost one round trip, nothing else)', () => {
    const lately = new HeldLately();
    const at = 5000;
    for (let i = 0; i < 1024; i++) lately.mark(`lock-${i}`, at);
    expect(lately.has('lock-0', at)).toBe(true);
    expect(lately.has('lock-1023', at)).toBe(true);
    lately.mark('lock-0', at); // marked again: no new name, nothing forgotten
    expect(lately.has('lock-1023', at)).toBe(true);
    lately.mark('one-more', at);
    expect(lately.has('one-more', at)).toBe(true);
    expect(lately.has('lock-0', at)).toBe(false);
    expect(lately.has('lock-1023', at)).toBe(false);
  });
});
