/**
 * The Redlock fan-out's commands sent without waiting (`sendOne`: a lost attempt's releases, a
 * late reply's give-back): to a hung node, at most 1000 unanswered at a time, as `each` sends
 * releases, so a black-holed connection does not grow without end (docs/safety.md, "hung node").
 */
import { describe, expect, it } from 'vitest';
import type { RedisBackend } from '../../src/backend/redis-backend.js';
import { fanOut } from '../../src/backend/redlock-fan-out.js';

const nodes = [{}, {}, {}] as unknown as RedisBackend[];
const never = (): Promise<never> => new Promise<never>(() => {});

describe('fanOut.sendOne', () => {
  it('sends to a node that answers each time, and to a hung node at most 1000 commands unanswered', async () => {
    const each = fanOut(nodes, 2);
    // Node 0 never answers and the others vote against: the call ends at its deadline, node 0 hung.
    const answers = await each(20, 'skip', (_node, i) => (i === 0 ? never() : Promise.resolve(false)), (v) => v);
    expect(answers[0]).toMatchObject({ ok: false, error: { name: 'NodeTimeoutError' } });
    let toHung = 0;
    let toLive = 0;
    for (let i = 0; i < 1500; i++) {
      each.sendOne(0, () => (toHung++, never()));
      each.sendOne(1, () => (toLive++, Promise.resolve()));
    }
    expect(toHung).toBe(1000);
    expect(toLive).toBe(1500);
  });

  it('a hung node is sent again once commands queued to it are answered', async () => {
    const each = fanOut(nodes, 2);
    await each(20, 'skip', (_node, i) => (i === 0 ? never() : Promise.resolve(false)), (v) => v);
    const answers: Array<() => void> = [];
    let sent = 0;
    const held = (): Promise<void> => {
      sent++;
      return new Promise<void>((resolve) => answers.push(resolve));
    };
    for (let i = 0; i < 1001; i++) each.sendOne(0, held);
    expect(sent).toBe(1000);
    answers[0]!();
    await new Promise((r) => setImmediate(r));
    each.sendOne(0, held);
    expect(sent).toBe(1001);
  });
});
