/** Which holder a failed Redlock acquire names (issues 18, 21): the tag a majority of the nodes name, else none. */
import { describe, expect, it } from 'vitest';
import type { AcquireReply } from '../../src/backend/backend.js';
import type { Answer } from '../../src/backend/redlock-fan-out.js';
import { namedHolder } from '../../src/backend/redlock-votes.js';

const busy = (holder?: string): Answer<AcquireReply> => ({ ok: true, value: holder === undefined ? { acquired: false, ttl: 500 } : { acquired: false, ttl: 500, holderTag: holder } });
const won: Answer<AcquireReply> = { ok: true, value: { acquired: true, fence: 7 } };
const failed: Answer<AcquireReply> = { ok: false, error: new Error('down') };

describe('namedHolder', () => {
  it('names the holder a majority of the nodes name, whatever the others answered', () => {
    expect(namedHolder([busy('a'), busy('a'), busy('a')], 2)).toBe('a');
    expect(namedHolder([busy('a'), failed, busy('a')], 2)).toBe('a');
    expect(namedHolder([won, busy('a'), busy('a')], 2)).toBe('a');
    expect(namedHolder([busy('a'), busy('b'), busy('a'), busy(), busy('a')], 3)).toBe('a');
  });

  it('names nobody when the nodes do not agree or too few name one', () => {
    expect(namedHolder([busy('a'), busy('b'), won], 2)).toBeUndefined();
    expect(namedHolder([busy('a'), busy(), busy()], 2)).toBeUndefined();
    expect(namedHolder([busy('a'), failed, failed], 2)).toBeUndefined();
    expect(namedHolder([busy('a'), busy('a'), busy('b'), busy('b'), won], 3)).toBeUndefined();
  });
});
