/** An inbox message, `"<member> <fence>"`, as release.lua and keep-queued.lua write it, read back by the waiting process. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseGrant } from '../../src/backend/backend.js';

/** A member as a manager names its waiters, `<managerId>:<waiterId>` (no space in either). */
const member = fc.tuple(fc.stringMatching(/^[A-Za-z0-9_-]{1,24}$/), fc.nat()).map(([manager, waiter]) => `${manager}:${waiter}`);

describe('parseGrant', () => {
  it('reads back every member and fence a script writes (a fence in whole digits, 0 for a wake-up)', () => {
    fc.assert(
      fc.property(member, fc.oneof(fc.constant(0), fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER })), (m, fence) => {
        expect(parseGrant(`${m} ${fence}`)).toEqual({ member: m, fence });
      }),
      { seed: 20261126, numRuns: 2000 },
    );
  });

  it('reads a typical grant: a fence of microseconds since the epoch', () => {
    expect(parseGrant('Yx3kq9Zt2mPqWsd8fHk1Lw:17 1795614530460300')).toEqual({ member: 'Yx3kq9Zt2mPqWsd8fHk1Lw:17', fence: 1795614530460300 });
  });

  it('takes the member up to the last space', () => {
    expect(parseGrant('a b 12')).toEqual({ member: 'a b', fence: 12 });
  });

  it('refuses what no script writes: no member, no fence, a fence that is not whole digits or not a safe integer', () => {
    for (const message of ['', '12', ' 12', 'm', 'm ', 'm -1', 'm 1.5', 'm 1e3', 'm 0x10', 'm 12a', 'm  ', `m ${2 ** 53}`, 'm 99999999999999999', 'm 9007199254740992']) {
      expect(parseGrant(message), message).toBeUndefined();
    }
    expect(parseGrant(`m ${Number.MAX_SAFE_INTEGER}`)).toEqual({ member: 'm', fence: Number.MAX_SAFE_INTEGER });
  });

  it('refuses any message that is not a member, a space and whole digits', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 40 }), (message) => {
        const parsed = parseGrant(message);
        if (parsed === undefined) return;
        expect(message).toBe(`${parsed.member} ${String(parsed.fence).padStart(message.length - parsed.member.length - 1, '0')}`);
        expect(Number.isSafeInteger(parsed.fence)).toBe(true);
      }),
      { seed: 20261126, numRuns: 2000 },
    );
  });
});
