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
   * Who holds it (the description its manager registered: the `holder` option of createLocks, on
   * by default) and since when (null where the store cannot tell: Redlock). Null when free, or
   * when its manager registers nothing (`holder: false`) or is older than this registry.
   */
  readonly holder: HolderInfo | null;
}

export function lockInfo(name: string, snapshot: LockSnapshot, holder: HolderInfo | null): LockInfo {
  return {
    name,
    held: snapshot.token !== null,
    ttl: snapshot.ttl,
    fence: snapshot.fence,
    queued: snapshot.queued,
    holder: snapshot.token === null ? null : holder,
  };
}
