/**
 * The renewal scheduler's queue (src/lease/renewal-queue.ts): watchdogs come out in the order due,
 * each once, whether they wait in an interval's lane or in the heap of retries, and a watchdog
 * taken out (stopped) or queued again never comes out twice.
 */
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
});
