/**
 * The Redis keys and channel of one lock. All share the hash tag `{name}`, so they land in one
 * Redis Cluster slot and one Lua script may touch them all.
 */
export interface LockKeys {
  /** The lock's name as the user gave it. */
  readonly name: string;
  /** Holds the holder's token while a lease lives. */
  readonly lock: string;
  /** The last fence issued for this lock. */
  readonly fence: string;
  /** Where releases are announced. */
  readonly channel: string;
}

export const DEFAULT_PREFIX = 'latchkey:';

export function lockKeys(prefix: string, name: string): LockKeys {
  const base = `${prefix}{${name}}`;
  return { name, lock: base, fence: `${base}:fence`, channel: `${base}:released` };
}
