/** The set of leases held and deadlines watched: a linked list through its items, against a model (a Set). */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LinkedSet } from '../../src/linked-set.js';

/** The values of an item's own symbol-keyed properties: the set's links, once it has held the item. */
const linksOf = (item: object): unknown[] => Object.getOwnPropertySymbols(item).map((k) => (item as Record<symbol, unknown>)[k]);

describe('LinkedSet', () => {
  it('adds once, deletes once, and goes through its items newest first', () => {
    const set = new LinkedSet<{ n: number }>();
    const [a, b, c] = [{ n: 1 }, { n: 2 }, { n: 3 }];
    set.add(a);
    set.add(b);
    set.add(b);
    set.add(c);
    expect(set.size).toBe(3);
    expect(set.toArray()).toEqual([c, b, a]);
    expect(set.delete(b)).toBe(true);
    expect(set.delete(b)).toBe(false);
    expect(set.has(b)).toBe(false);
    expect(set.toArray()).toEqual([c, a]);
    expect(set.first()).toBe(c);
    expect(set.next(c)).toBe(a);
    expect(set.next(a)).toBeUndefined();
    expect(linksOf(b).every((v) => v === undefined || v === false)).toBe(true);
  });

  it('an item is in one set at a time: another set does not see it, cannot take it out, and refuses to add it', () => {
    const [one, other] = [new LinkedSet<{ n: number }>(), new LinkedSet<{ n: number }>()];
    const item = { n: 1 };
    one.add(item);
    expect(other.has(item)).toBe(false);
    expect(other.delete(item)).toBe(false);
    expect(one.has(item)).toBe(true);
    expect(() => other.add(item)).toThrow(/another LinkedSet/);
    expect(one.toArray()).toEqual([item]);
    one.delete(item);
    other.add(item);
    expect(other.toArray()).toEqual([item]);
  });

  // Seeded and replayable: LATCHKEY_PROP_SEED=<seed> LATCHKEY_PROP_PATH=<path> npx vitest run test/unit/linked-set.test.ts
  it('against a Set: any sequence of adds and deletes holds the same items, and an item out keeps no link to the others', () => {
    const seed = process.env.LATCHKEY_PROP_SEED === undefined ? 1127 : Number(process.env.LATCHKEY_PROP_SEED);
    fc.assert(
      fc.property(fc.array(fc.record({ add: fc.boolean(), who: fc.nat(15) }), { minLength: 1, maxLength: 200 }), (ops) => {
        const items = Array.from({ length: 16 }, (_, n) => ({ n }));
        const set = new LinkedSet<{ n: number }>();
        const model = new Set<{ n: number }>();
        for (const { add, who } of ops) {
          const item = items[who]!;
          if (add) {
            set.add(item);
            model.add(item);
          } else {
            expect(set.delete(item)).toBe(model.delete(item));
          }
          expect(set.size).toBe(model.size);
          expect(new Set(set.toArray())).toEqual(model);
          for (const other of items) {
            expect(set.has(other)).toBe(model.has(other));
            if (!model.has(other)) expect(linksOf(other).every((v) => v === undefined || v === false)).toBe(true);
          }
        }
      }),
      { seed, numRuns: 200, ...(process.env.LATCHKEY_PROP_PATH ? { path: process.env.LATCHKEY_PROP_PATH } : {}) },
    );
  });
});
