/**
 * The renewal scheduler's queue (src/lease/renewal-queue.ts): watchdogs come out in the order due,
 * each once, whether they wait in an interval's lane or in the heap of retries, and a watchdog
 * taken out (stopped) or queued again never comes out twice.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { NOT_QUEUED, RenewalQueue, type Queued } from '../../src/lease/renewal-queue.js';

interface Item extends Queued {
  name: string;
  due: number;
  every: number;
}

const item = (name: string, due: number, every: number): Item => ({ name, due, every, slot: NOT_QUEUED, seq: 0 });

/** Everything due by `t` (no window), in the order it came out. */
function take(q: RenewalQueue<Item>, t: number, window = 0): string[] {
  const out: string[] = [];
  q.takeDue(t, () => window, (w) => out.push(w.name));
  return out;
}

describe('RenewalQueue', () => {
  it('gives out lane entries and heap entries due by a time, each once, and tells the earliest left', () => {
    const q = new RenewalQueue<Item>();
    const [a, b, c] = [item('a', 100, 100), item('b', 110, 100), item('c', 300, 200)];
    const retry = item('retry', 50, 100);
    for (const w of [a, b, c]) q.add(w, true);
    q.add(retry, false);
    expect(q.earliest()).toBe(50);
    expect(take(q, 105).sort()).toEqual(['a', 'retry']);
    expect(q.earliest()).toBe(110);
    expect(take(q, 110, 200)).toEqual(['b', 'c']); // within their window
    expect(q.earliest()).toBe(Infinity);
    expect(take(q, 1e9)).toEqual([]);
  });

  it('skips a watchdog taken out, and gives one queued again only at its new place', () => {
    const q = new RenewalQueue<Item>();
    const [a, b] = [item('a', 100, 100), item('b', 120, 100)];
    q.add(a, true);
    q.add(b, true);
    q.remove(a);
    expect(q.earliest()).toBe(120);
    // Queued again, later in the lane: its old entry is stale.
    a.due = 200;
    q.add(a, true);
    expect(take(q, 150)).toEqual(['b']);
    expect(take(q, 250)).toEqual(['a']);
    // From the heap to a lane and back: one entry at a time.
    b.due = 10;
    q.add(b, false);
    b.due = 20;
    q.add(b, true);
    b.due = 30;
    q.add(b, false);
    expect(take(q, 1e9)).toEqual(['b']);
  });

  it('keeps the heap ordered through many adds and removals', () => {
    const q = new RenewalQueue<Item>();
    const items = Array.from({ length: 200 }, (_, i) => item(`r${i}`, (i * 7919) % 1000, 5000));
    for (const w of items) q.add(w, false);
    for (const w of items.filter((_, i) => i % 3 === 0)) q.remove(w);
    const left = items.filter((_, i) => i % 3 !== 0);
    const order: number[] = [];
    q.takeDue(1e9, () => 0, (w) => order.push(w.due));
    expect(order).toEqual(left.map((w) => w.due).sort((x, y) => x - y));
  });

  it('a lane renewed thousands of times (its consumed entries dropped on the way) still gives each entry once, in order', () => {
    const q = new RenewalQueue<Item>();
    const w = item('w', 0, 10);
    q.add(w, true);
    const other = item('other', 0, 10);
    q.add(other, true);
    for (let round = 1; round <= 5000; round++) {
      expect(take(q, round * 10 - 10).sort()).toEqual(['other', 'w']);
      w.due = other.due = round * 10;
      q.add(w, true);
      q.add(other, true);
    }
    expect(q.earliest()).toBe(50_000);
  });

  it('a lane that wraps around its ring and then grows keeps its order', () => {
    const q = new RenewalQueue<Item>();
    const items = Array.from({ length: 40 }, (_, i) => item(`w${i}`, 0, 100));
    const stays = item('stays', 150, 100);
    // Ten in the lane and one behind them; the ten taken and queued again behind it: the ring's
    // head has moved (the lane never emptied), and its entries wrap around.
    for (const w of items.slice(0, 10)) {
      w.due = 100;
      q.add(w, true);
    }
    q.add(stays, true);
    expect(take(q, 100)).toHaveLength(10);
    for (const w of items.slice(0, 10)) {
      w.due = 200;
      q.add(w, true);
    }
    // Thirty more, due later: the ring (16 slots) grows while its head is not at its start.
    for (const w of items.slice(10)) {
      w.due = 300;
      q.add(w, true);
    }
    expect(take(q, 200)).toEqual(['stays', ...items.slice(0, 10).map((w) => w.name)]);
    expect(take(q, 300)).toEqual(items.slice(10).map((w) => w.name));
    expect(q.earliest()).toBe(Infinity);
  });

  // Seeded and replayable: LATCHKEY_PROP_SEED=<seed> LATCHKEY_PROP_PATH=<path> npx vitest run test/unit/renewal-queue.test.ts
  it('against a model: any sequence of adds (lanes and heap), removals and takes gives out exactly what is due, each once', () => {
    type Op = { kind: 'regular' | 'retry' | 'remove'; who: number; delay: number } | { kind: 'tick'; by: number };
    const op: fc.Arbitrary<Op> = fc.oneof(
      fc.record({ kind: fc.constantFrom('regular' as const, 'retry' as const, 'remove' as const), who: fc.nat(39), delay: fc.nat(30) }),
      fc.record({ kind: fc.constant('tick' as const), by: fc.nat(25) }),
    );
    const seed = process.env.LATCHKEY_PROP_SEED === undefined ? 2211 : Number(process.env.LATCHKEY_PROP_SEED);
    fc.assert(
      fc.property(fc.array(op, { minLength: 1, maxLength: 400 }), (ops) => {
        const q = new RenewalQueue<Item>();
        // 40 watchdogs on two intervals: lanes wrap around and grow past their first 16 slots.
        const items = Array.from({ length: 40 }, (_, i) => item(`w${i}`, 0, i % 2 === 0 ? 10 : 20));
        const model = new Map<Item, number>(); // queued -> due
        let t = 0;
        for (const o of ops) {
          if (o.kind === 'tick') {
            t += o.by;
            const out: Item[] = [];
            q.takeDue(t, () => 0, (w) => out.push(w));
            const due = [...model].filter(([, at]) => at <= t).map(([w]) => w);
            expect(new Set(out).size).toBe(out.length);
            expect(out.map((w) => w.name).sort()).toEqual(due.map((w) => w.name).sort());
            for (const w of out) model.delete(w);
          } else if (o.kind === 'remove') {
            q.remove(items[o.who]!);
            model.delete(items[o.who]!);
          } else {
            const w = items[o.who]!;
            // A lane's entries are due one interval from now (the clock only goes forward); a retry any time.
            w.due = o.kind === 'regular' ? t + w.every : t + o.delay;
            q.add(w, o.kind === 'regular');
            model.set(w, w.due);
          }
          expect(q.earliest()).toBe(model.size === 0 ? Infinity : Math.min(...model.values()));
        }
      }),
      { seed, numRuns: 200, ...(process.env.LATCHKEY_PROP_PATH ? { path: process.env.LATCHKEY_PROP_PATH } : {}) },
    );
  });
});
