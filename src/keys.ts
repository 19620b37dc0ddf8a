/**
 * The Redis keys of one lock. All share the hash tag `{name}`, so they land in one Redis Cluster
 * slot and one Lua script may touch them all.
 */
export interface LockKeys {
  /** The lock's name as the user gave it. */
  readonly name: string;
  /** Holds the holder's token while a lease lives. */
  readonly lock: string;
  /** The last fence issued for this lock. */
  readonly fence: string;
  /** Sorted set of the waiters queued for this lock, in arrival order. */
  readonly queue: string;
  /** Hash from queued waiter to the deadline after which its entry is dead. */
  readonly alive: string;
}

export const DEFAULT_PREFIX = 'latchkey:';

export function lockKeys(prefix: string, name: string): LockKeys {
  const base = `${prefix}{${name}}`;
  return { name, lock: base, fence: `${base}:fence`, queue: `${base}:queue`, alive: `${base}:alive` };
}

/** The channel prefix of waiters' inboxes: a manager listens on `<prefix>inbox:<managerId>`. */
export function inboxPrefix(prefix: string): string {
  return `${prefix}inbox:`;
}
