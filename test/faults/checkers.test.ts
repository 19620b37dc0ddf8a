/**
 * The checkers on hand-written histories: each one finds the violation it exists for, so a fault
 * test that asserts "nothing found" can fail.
 */
import { describe, expect, it } from 'vitest';
import { fenceOrderViolations, fencedWrites, grants, handoffs, lostUpdates, overlaps, recoveries, staleOperations, unsettledAcquires } from './checkers.js';
import type { HistoryEvent } from './history.js';

const ms = (value: number): bigint => BigInt(value) * 1_000_000n;
const e = (t: number, p: string, ev: string, extra: Partial<HistoryEvent> = {}): HistoryEvent => ({ t: ms(t), p, ev, n: 0, ...extra });
const grant = (t: number, p: string, fence: number, validFor: number): HistoryEvent => e(t, p, 'granted', { fence, validUntil: ms(t + validFor) });

describe('fault checkers', () => {
  it('see two holders whose windows overlap, and not a holder granted after the other released', () => {
    const overlapping = [grant(0, 'a', 1, 100), grant(50, 'b', 2, 100)];
    expect(overlaps(overlapping)).toHaveLength(1);
    expect(overlaps(overlapping)[0]!.ms).toBe(50);
    const handedOver = [grant(0, 'a', 1, 100), e(40, 'a', 'release-sent'), grant(50, 'b', 2, 100)];
    expect(overlaps(handedOver)).toEqual([]);
    const died = [grant(0, 'a', 1, 100), e(30, 'harness', 'exit', { of: 'a' }), grant(50, 'b', 2, 100)];
    expect(overlaps(died)).toEqual([]);
    expect(grants(died)[0]!.endedBy).toBe('died');
  });

  it('see a watchdog-extended window', () => {
    const extended = [grant(0, 'a', 1, 100), e(60, 'a', 'valid', { validUntil: ms(200) }), grant(150, 'b', 2, 100)];
    expect(overlaps(extended)).toHaveLength(1);
  });

  it('see a fence that repeats or goes back', () => {
    expect(fenceOrderViolations([grant(0, 'a', 5, 10), grant(20, 'b', 5, 10)])).toHaveLength(1);
    expect(fenceOrderViolations([grant(0, 'a', 5, 10), grant(20, 'b', 4, 10)])).toHaveLength(1);
    expect(fenceOrderViolations([grant(0, 'a', 5, 10), grant(20, 'b', 6, 10)])).toEqual([]);
  });

  it('see a stale write the resource accepted', () => {
    const history = [
      e(0, 'b', 'write-attempted', { fence: 2 }),
      e(1, 'b', 'write-accepted', { fence: 2 }),
      e(5, 'a', 'write-attempted', { fence: 1 }),
      e(6, 'a', 'write-accepted', { fence: 1 }),
    ];
    expect(fencedWrites(history).staleAccepted).toEqual([{ p: 'a', fence: 1, highest: 2 }]);
    const refused = [...history.slice(0, 3), e(6, 'a', 'write-refused', { fence: 1 })];
    expect(fencedWrites(refused).staleAccepted).toEqual([]);
    expect(fencedWrites(refused).refused).toBe(1);
  });

  it('count lost updates of the unfenced counter', () => {
    expect(lostUpdates([e(0, 'a', 'counter-written', { read: 3 }), e(1, 'b', 'counter-written', { read: 3 })])).toBe(1);
    expect(lostUpdates([e(0, 'a', 'counter-written', { read: 3 }), e(1, 'b', 'counter-written', { read: 4 })])).toBe(0);
  });

  it('see an acquire that never settles or settles past its wait, excusing a dead process and time stopped', () => {
    const hung = [e(0, 'a', 'requested', { wait: 100 }), e(5_000, 'b', 'started')];
    expect(unsettledAcquires(hung, 500, ms(5_000))).toHaveLength(1);
    // Still pending at the end of the history: counted up to the time of the check.
    expect(unsettledAcquires([e(0, 'a', 'requested', { wait: 100 })], 500, ms(700))).toHaveLength(1);
    expect(unsettledAcquires([e(0, 'a', 'requested', { wait: 100 })], 500, ms(300))).toEqual([]);
    const late = [e(0, 'a', 'requested', { wait: 100 }), e(1_000, 'a', 'failed')];
    expect(unsettledAcquires(late, 500, ms(1_000))).toHaveLength(1);
    const stopped = [
      e(0, 'a', 'requested', { wait: 100 }),
      e(10, 'harness', 'fault', { kind: 'pause-worker', of: 'a' }),
      e(900, 'harness', 'heal', { kind: 'pause-worker', of: 'a' }),
      e(1_000, 'a', 'failed'),
    ];
    expect(unsettledAcquires(stopped, 500, ms(1_000))).toEqual([]);
    const dead = [e(0, 'a', 'requested', { wait: 100 }), e(50, 'harness', 'exit', { of: 'a' }), e(5_000, 'b', 'started')];
    expect(unsettledAcquires(dead, 500, ms(6_000))).toEqual([]);
  });

  it('measure the recovery after a holder dies from its validity end', () => {
    const history = [grant(0, 'a', 1, 100), e(30, 'harness', 'exit', { of: 'a' }), grant(180, 'b', 2, 100)];
    const [recovery] = recoveries(history);
    expect(recovery!.next?.p).toBe('b');
    expect(recovery!.afterValidity).toBe(80);
  });

  it('see a stale holder release or extend another holder\'s lock, and not a release before the next grant', () => {
    // a's validity ran out at 100; b was granted at 150; a's release sent at 200 reported success.
    const released = [grant(0, 'a', 1, 100), grant(150, 'b', 2, 100), e(200, 'a', 'release-sent', { fence: 1 }), e(201, 'a', 'released', { fence: 1 })];
    const [stale] = staleOperations(released);
    expect(stale).toMatchObject({ p: 'a', op: 'release', why: 'after-another-grant' });
    expect(stale!.other?.p).toBe('b');
    // The same release refused (LEASE_LOST) is no violation; nor is a release sent before b's grant
    // (a hand-off grants the lock after the release).
    expect(staleOperations([...released.slice(0, 3), e(201, 'a', 'release-failed', { fence: 1 })])).toEqual([]);
    const handedOff = [grant(0, 'a', 1, 100), e(50, 'a', 'release-sent', { fence: 1 }), e(52, 'a', 'released', { fence: 1 }), grant(53, 'b', 2, 100)];
    expect(staleOperations(handedOff)).toEqual([]);
    // An extension sent after b's grant that reported success (a new validity).
    const extended = [grant(0, 'a', 1, 100), grant(150, 'b', 2, 100), e(160, 'a', 'valid', { fence: 1, validUntil: ms(260), sent: ms(160) })];
    expect(staleOperations(extended)).toMatchObject([{ p: 'a', op: 'extend', why: 'after-another-grant' }]);
    // An extension sent after its own validity ended, even with nobody else granted.
    const late = [grant(0, 'a', 1, 100), e(130, 'a', 'valid', { fence: 1, validUntil: ms(230), sent: ms(120) })];
    expect(staleOperations(late)).toMatchObject([{ op: 'extend', why: 'after-own-validity' }]);
    // Within its validity, and chained: each extension counts from the last validity end.
    const chained = [
      grant(0, 'a', 1, 100),
      e(40, 'a', 'valid', { fence: 1, validUntil: ms(135), sent: ms(35) }),
      e(125, 'a', 'valid', { fence: 1, validUntil: ms(225), sent: ms(120) }),
    ];
    expect(staleOperations(chained)).toEqual([]);
  });

  it('measure how long a waiter waited after the lock was freed', () => {
    const history = [
      grant(0, 'a', 1, 5_000),
      e(10, 'b', 'requested', { n: 0 }),
      e(300, 'a', 'release-sent', { fence: 1 }),
      grant(900, 'b', 2, 5_000),
      e(1_000, 'c', 'requested', { n: 0 }),
      e(1_200, 'b', 'release-sent', { fence: 2 }),
      grant(1_210, 'c', 3, 5_000),
    ];
    expect(handoffs(history).map((h) => [h.from.p, h.to.p, h.ms])).toEqual([
      ['a', 'b', 600],
      ['b', 'c', 10],
    ]);
    // A process that asked only after the lock was free did not wait for it.
    expect(handoffs([grant(0, 'a', 1, 100), e(40, 'a', 'release-sent'), e(50, 'b', 'requested'), grant(60, 'b', 2, 100)])).toEqual([]);
  });
});
