/** One timer for many deadlines: each expires once it has passed, in deadline order, and a deleted one never does. */
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
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

  it('arms its timer for at most 2^31 - 1 ms (setTimeout fires at once past it) and expires a farther deadline only once it has passed', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    try {
      const armed = vi.spyOn(globalThis, 'setTimeout');
      const deadlines = new Deadlines();
      const log: string[] = [];
      const far = deadlineIn(2 ** 31 + 5000, 'far', log);
      deadlines.watch(far.deadline);
      expect(armed.mock.calls.map((call) => call[1])).toEqual([2 ** 31 - 1]);
      await vi.advanceTimersByTimeAsync(2 ** 31 - 1);
      expect(log).toEqual([]);
      expect(armed).toHaveBeenCalledTimes(2); // armed again, for the rest
      await vi.advanceTimersByTimeAsync(5000);
      expect(log).toEqual([]);
      await vi.advanceTimersByTimeAsync(5);
      expect(log).toEqual(['far']);
    } finally {
      vi.useRealTimers();
    }
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

  it('an expiry that ends the next deadline in the list, or watches a nearer one, leaves the others on time', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    try {
      const deadlines = new Deadlines();
      const log: string[] = [];
      const at = (ms: number): number => performance.now() + ms;
      const named = (name: string, ms: number, then?: () => void): Deadline => ({ at: at(ms), expire: () => (log.push(name), then?.()) });
      const later = named('later', 200);
      const nearer = named('nearer', 20);
      const c = named('c', 8);
      const b = named('b', 9);
      // Watched last, so first in the list, with b next: a's expiry ends b (a Redlock fan-out
      // settling) and watches a deadline nearer than any left (while the timer fires).
      const a = named('a', 8, () => {
        deadlines.delete(b);
        deadlines.watch(nearer);
      });
      for (const d of [later, c, b, a]) deadlines.watch(d);
      vi.advanceTimersByTime(8);
      expect(log).toEqual(['a', 'c']); // c, behind the one that left, in the same pass
      vi.advanceTimersByTime(13);
      expect(log).toEqual(['a', 'c', 'nearer']); // not held back until `later`
      vi.advanceTimersByTime(200);
      expect(log).toEqual(['a', 'c', 'nearer', 'later']);
    } finally {
      vi.useRealTimers();
    }
  });

  describe('against a model (fake timers)', () => {
    afterEach(() => {
      vi.useRealTimers();
    });

    // Seeded and replayable: LATCHKEY_PROP_SEED=<seed> LATCHKEY_PROP_PATH=<path> npx vitest run test/unit/deadlines.test.ts
    it('any sequence of watches (again: earlier), deletes, expiries that end or watch others, and time: each due deadline expires once, on time, never after it left, and one not watched keeps no link', () => {
      type Op = { kind: 'watch'; who: number; delay: number } | { kind: 'delete'; who: number } | { kind: 'tick'; by: number };
      const N = 12;
      const op: fc.Arbitrary<Op> = fc.oneof(
        fc.record({ kind: fc.constant('watch' as const), who: fc.nat(N - 1), delay: fc.nat(40) }),
        fc.record({ kind: fc.constant('delete' as const), who: fc.nat(N - 1) }),
        fc.record({ kind: fc.constant('tick' as const), by: fc.nat(30) }),
      );
      const seed = process.env.LATCHKEY_PROP_SEED === undefined ? 1126 : Number(process.env.LATCHKEY_PROP_SEED);
      fc.assert(
        fc.property(fc.array(op, { minLength: 1, maxLength: 120 }), (ops) => {
          vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
          try {
            const deadlines = new Deadlines();
            const watched = new Map<number, number>(); // who -> at, in the model
            const expired: Array<{ who: number; at: number; now: number }> = [];
            type Item = Deadline & { at: number };
            const items: Item[] = Array.from({ length: N }, (_, who) => ({
              at: 0,
              expire: (now: number) => {
                expect(watched.has(who), `d${who} expired while not watched`).toBe(true);
                expired.push({ who, at: items[who]!.at, now });
                watched.delete(who);
                // A third of them end another (a fan-out settling), a third watch another one 5 ms on.
                if (who % 3 === 1) {
                  deadlines.delete(items[(who + 1) % N]!);
                  watched.delete((who + 1) % N);
                } else if (who % 3 === 2 && !watched.has((who + 2) % N)) {
                  const other = items[(who + 2) % N]!;
                  other.at = now + 5;
                  watched.set((who + 2) % N, other.at);
                  deadlines.watch(other);
                }
              },
            }));
            const linksOf = (item: Item): unknown[] => Object.getOwnPropertySymbols(item).map((k) => (item as unknown as Record<symbol, unknown>)[k]);
            for (const o of ops) {
              const now = performance.now();
              if (o.kind === 'watch') {
                const item = items[o.who]!;
                const at = now + o.delay;
                // Watched again, a deadline only moves earlier (as a lease's validity does).
                if (!watched.has(o.who) || at < item.at) item.at = at;
                watched.set(o.who, item.at);
                deadlines.watch(item);
              } else if (o.kind === 'delete') {
                deadlines.delete(items[o.who]!);
                watched.delete(o.who);
              } else {
                vi.advanceTimersByTime(o.by);
                const t = performance.now();
                for (const e of expired) expect(e.now).toBeGreaterThanOrEqual(e.at);
                // Timers fire on whole milliseconds: what was due a millisecond ago has expired.
                for (const [who, at] of watched) expect(at, `d${who} is overdue`).toBeGreaterThan(t - 1);
                expired.length = 0;
              }
              for (let who = 0; who < N; who++) {
                if (!watched.has(who)) expect(linksOf(items[who]!).every((v) => v === undefined || v === false), `d${who} keeps a link`).toBe(true);
              }
            }
          } finally {
            vi.useRealTimers();
          }
        }),
        { seed, numRuns: 200, ...(process.env.LATCHKEY_PROP_PATH ? { path: process.env.LATCHKEY_PROP_PATH } : {}) },
      );
    });
  });
});
