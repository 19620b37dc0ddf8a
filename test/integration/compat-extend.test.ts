/**
 * Compat mode's extend (compat-extend.lua), called directly on one real Redis as
 * compat-backend.ts calls it: it moves a held lease's expiry timestamp, and refuses once that
 * timestamp has passed even while the key lingers (a legacy client may already be between its
 * GET and its GETSET), or when the key was written by someone else.
 */
import { describe, expect, it } from 'vitest';
import { COMPAT_LINGER } from '../../src/backend/compat-backend.js';
import { lockKeys } from '../../src/keys.js';
import { compatExtendScript } from '../../src/lua/scripts.generated.js';
import { uniquePrefix, useRedisServer } from '../helpers/harness.js';

const redis = useRedisServer();
const TOKEN = 'cafe0123' + '0'.repeat(32);

/** The server's clock, ms. */
async function serverMs(): Promise<number> {
  const [s, us] = await redis.raw.time();
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

/** A compat lock (its legacy key and latchkey's owner key beside it) and its extend, in milliseconds mode. */
function compatLock(name: string): { legacyKey: string; owner: string; extend: (ttl: number) => Promise<unknown> } {
  const prefix = uniquePrefix();
  const keys = lockKeys(prefix, name);
  const legacyKey = `${prefix}${name}`;
  return {
    legacyKey,
    owner: keys.owner,
    extend: (ttl) => redis.raw.eval(compatExtendScript.source, 2, legacyKey, keys.owner, TOKEN, String(ttl), '1', String(COMPAT_LINGER)),
  };
}

describe('compat mode: extend', () => {
  it('moves the expiry timestamp of a lease it holds to now + ttl', async () => {
    const { legacyKey, owner, extend } = compatLock('held');
    const now = await serverMs();
    await redis.raw.set(legacyKey, String(now + 2_000), 'PX', 2_000 + COMPAT_LINGER);
    await redis.raw.set(owner, TOKEN, 'PX', 2_000 + COMPAT_LINGER);
    await expect(extend(10_000)).resolves.toBe(1);
    const stamp = Number(await redis.raw.get(legacyKey));
    expect(stamp).toBeGreaterThanOrEqual(now + 10_000);
    expect(stamp).toBeLessThan((await serverMs()) + 10_001);
    expect(await redis.raw.pttl(owner)).toBeGreaterThan(10_000);
  });

  it('refuses once the timestamp has passed, though the keys still linger, and changes nothing', async () => {
    const { legacyKey, owner, extend } = compatLock('passed');
    const stamp = String((await serverMs()) - 5);
    await redis.raw.set(legacyKey, stamp, 'PX', COMPAT_LINGER);
    await redis.raw.set(owner, TOKEN, 'PX', COMPAT_LINGER);
    await expect(extend(10_000)).resolves.toBe(0);
    expect(await redis.raw.get(legacyKey)).toBe(stamp);
    expect(await redis.raw.pttl(legacyKey)).toBeLessThanOrEqual(COMPAT_LINGER);
  });

  it('refuses a key a legacy client wrote (no expiry on it) and leaves it alone', async () => {
    const { legacyKey, owner, extend } = compatLock('legacy');
    const stamp = String((await serverMs()) + 5_000);
    await redis.raw.set(legacyKey, stamp); // a legacy SETNX or GETSET sets no expiry
    await redis.raw.set(owner, TOKEN, 'PX', 10_000); // left by our earlier lease
    await expect(extend(10_000)).resolves.toBe(-1);
    expect(await redis.raw.get(legacyKey)).toBe(stamp);
    expect(await redis.raw.pttl(legacyKey)).toBe(-1);
  });
});
