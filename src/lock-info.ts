import type { HolderInfo, LockSnapshot } from './backend/backend.js';

/** What {@link Locks.inspect}, {@link Locks.list} and {@link Locks.forceRelease} report about a lock. */
export interface LockInfo {
  /** The lock's name. */
  readonly name: string;
  /** Whether a lease holds it now. */
  readonly held: boolean;
  /** Remaining time to live of the lease, ms (0 when free; -1 when the key has no expiry, which latchkey never sets). */
  readonly ttl: number;
  /**
   * The last fence issued for this lock, while the store still knows it (null otherwise); the
   * next lease's fence will be higher. Over Redlock, the highest of the nodes' counters, which can
   * be above the current lease's fence when a node outside its majority counted alone.
   */
  readonly fence: number | null;
  /** Entries in the lock's wait queue (a waiter that died counts until its entry is cleaned up). */
  readonly queued: number;
  /**
   * Who holds it and since when, if the holder's manager records itself (the `holder` option of
   * createLocks; the `latchkey` command always does). Null when free or not recorded.
   */
  readonly holder: HolderInfo | null;
}

export function lockInfo(name: string, snapshot: LockSnapshot): LockInfo {
  return {
    name,
    held: snapshot.token !== null,
    ttl: snapshot.ttl,
    fence: snapshot.fence,
    queued: snapshot.queued,
    holder: snapshot.holder,
  };
}
