/**
 * Write coalescing on one connection (src/client/coalesce-writes.ts): which commands are corked,
 * and that the cork is always undone by the end of the turn, however the turn's commands come
 * (at once, after promise jobs, in ticks). The stream here is a cork counter, as Node's
 * `Writable.cork()`/`uncork()` count: nothing of Redis is involved.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { coalesceWrites, MAX_CORKED_COMMANDS, type CorkableStream } from '../../src/client/coalesce-writes.js';

/** A stream that counts its corks, and records for each command whether it was corked when written. */
class CorkCounter implements CorkableStream {
  depth = 0;
  corks = 0;
  flushes = 0;
  readonly written: boolean[] = [];
  cork(): void {
    this.depth++;
    this.corks++;
  }
  uncork(): void {
    if (this.depth === 0) throw new Error('uncork without a cork');
    this.depth--;
    if (this.depth === 0) this.flushes++;
  }
  /** A command, with `before` called first (as the adapters do). */
  send(before: () => void): void {
    before();
    this.written.push(this.depth > 0);
  }
}

/** The end of this turn of the event loop: every tick and promise job queued in it has run. */
const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('coalesceWrites', () => {
  it('writes a lone command at once, turn after turn, and corks nothing', async () => {
    const s = new CorkCounter();
    const before = coalesceWrites(() => s);
    for (let turn = 0; turn < 5; turn++) {
      s.send(before);
      await nextTurn();
    }
    expect(s.written).toEqual([false, false, false, false, false]);
    expect(s.corks).toBe(0);
  });

  it('after lone turns, writes the first command of a busy turn at once and corks the rest until the turn ends', async () => {
    const s = new CorkCounter();
    const before = coalesceWrites(() => s);
    s.send(before);
    await nextTurn();
    s.send(before);
    s.send(before);
    await Promise.resolve(); // a promise job later, in the same turn
    s.send(before);
    expect(s.depth).toBe(1);
    await nextTurn();
    expect(s.written).toEqual([false, false, true, true]);
    expect(s.depth).toBe(0);
    expect(s.flushes).toBe(1);
  });

  it('corks the first command of a turn that follows a busy one, and goes back to writing at once after a lone turn', async () => {
    const s = new CorkCounter();
    const before = coalesceWrites(() => s);
    s.send(before);
    s.send(before); // busy turn
    await nextTurn();
    s.send(before); // corked: the last turn sent two
    await nextTurn();
    s.send(before); // the last turn sent one: written at once
    await nextTurn();
    expect(s.written).toEqual([false, true, true, false]);
    expect(s.depth).toBe(0);
  });

  it(`sends a corked turn in batches of ${MAX_CORKED_COMMANDS} commands`, async () => {
    const s = new CorkCounter();
    const before = coalesceWrites(() => s);
    s.send(before);
    s.send(before);
    await nextTurn();
    for (let i = 0; i < 3 * MAX_CORKED_COMMANDS; i++) s.send(before);
    expect(s.flushes).toBe(1 + 2); // the first turn's, then two full batches
    await nextTurn();
    expect(s.flushes).toBe(1 + 3);
    expect(s.depth).toBe(0);
  });

  it('corks nothing while the connection has no ready socket, and starts again once it has', async () => {
    let ready = false;
    const s = new CorkCounter();
    const before = coalesceWrites(() => (ready ? s : undefined));
    for (let i = 0; i < 3; i++) s.send(before);
    await nextTurn();
    expect(s.corks).toBe(0);
    ready = true;
    s.send(before); // the last turn sent three: corked
    s.send(before);
    await nextTurn();
    expect(s.written.slice(3)).toEqual([true, true]);
    expect(s.depth).toBe(0);
  });

  it('leaves no cork past the turn, whatever mix of commands, promise jobs and ticks it runs (seeded)', async () => {
    // One step of a turn: a command now, a command after some promise jobs, or one in a tick.
    const step = fc.oneof(fc.constant({ at: 'now' as const }), fc.record({ at: fc.constant('jobs' as const), hops: fc.integer({ min: 1, max: 4 }) }), fc.constant({ at: 'tick' as const }));
    const turn = fc.record({ steps: fc.array(step, { maxLength: 40 }), socket: fc.boolean() });
    await fc.assert(
      fc.asyncProperty(fc.array(turn, { minLength: 1, maxLength: 12 }), async (turns) => {
        const s = new CorkCounter();
        let ready = true;
        const before = coalesceWrites(() => (ready ? s : undefined), 4);
        for (const t of turns) {
          ready = t.socket;
          const later: Promise<void>[] = [];
          for (const st of t.steps) {
            if (st.at === 'now') s.send(before);
            else if (st.at === 'tick') process.nextTick(() => s.send(before));
            else {
              let p = Promise.resolve();
              for (let h = 0; h < st.hops; h++) p = p.then(() => {});
              later.push(p.then(() => s.send(before)));
            }
          }
          await nextTurn();
          await Promise.all(later);
          // Every command of the turn was written, and nothing stays corked into the next turn.
          expect(s.depth).toBe(0);
        }
        const count = turns.reduce((n, t) => n + t.steps.length, 0);
        expect(s.written).toHaveLength(count);
      }),
      { seed: 20261127, numRuns: 300 },
    );
  });
});
