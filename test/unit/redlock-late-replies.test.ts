/**
 * LateReplies, the Redlock backend's record of acquire attempts whose replies may still come: a
 * record lives while a reply is outstanding, and one dropped when the map was full is known to be
 * dropped (a late reply read against it is left to its TTL, never given back).
 */
import { describe, expect, it } from 'vitest';
import { LateReplies } from '../../src/backend/redlock-late-replies.js';

describe('LateReplies', () => {
  it('keeps no record of an attempt that sent nothing (every node skipped as hung): such records do not pile up and push out live ones', () => {
    const late = new LateReplies();
    const live = late.sentAttempts('live');
    late.sending(live, 0, late.nextAttempt(), 0); // a reply outstanding from node 0
    for (let i = 0; i < 5000; i++) {
      const idle = late.sentAttempts(`idle-${i}`);
      late.sentAll(`idle-${i}`, idle); // nothing was sent
      expect(late.inFlight(`idle-${i}`)).toBeUndefined();
    }
    expect(late.tracks('live', live)).toBe(true);
    late.replied('live', live);
    expect(late.inFlight('live')).toBeUndefined();
  });

  it('knows a record dropped when the map was full: a later attempt of the same token has a record of its own', () => {
    const late = new LateReplies();
    const first = late.sentAttempts('tok');
    late.sending(first, 2, late.nextAttempt(), 0);
    for (let i = 0; i < 4096; i++) {
      const other = late.sentAttempts(`other-${i}`);
      late.sending(other, 0, late.nextAttempt(), 0); // replies that never come: the map fills
    }
    expect(late.tracks('tok', first)).toBe(false);
    const again = late.sentAttempts('tok');
    late.sending(again, 2, late.nextAttempt(), 0);
    expect(late.tracks('tok', again)).toBe(true);
    expect(late.tracks('tok', first)).toBe(false);
    // The dropped record would still say "give back" for its attempt: the backend asks `tracks` first.
    expect(late.givesBack(first, 2, first.last[2]!, 0)).toBe(true);
  });
});
