import type { FencedValue } from './backend/backend.js';
import type { FairLock, FairLockOptions } from './fair-lock.js';
import type { Lease } from './lease/lease.js';
import type { LockInfo } from './lock-info.js';
import type { MultiLease } from './multi-lease.js';
import type { AcquireOptions, CloseOptions } from './options.js';
import type { ReadWriteLock, ReadWriteLockOptions } from './read-write-lock.js';
import type { Semaphore, SemaphoreOptions } from './semaphore.js';

/** The lock manager returned by {@link createLocks}. */
export interface Locks {
  /** Which backend the manager runs on: `redis (ioredis)`, `redis (node-redis)`, `redis`, `memory`. */
  readonly backend: string;
  /**
   * Acquires the lock `key`, waiting up to `wait` ms. Rejects with {@link LockTimeoutError} when
   * the wait runs out, with `signal.reason` when aborted, with `BackendError` when Redis fails.
   * Waiters of one manager for one key are served first come, first served. With `reentrant`,
   * inside a `withLock` scope of this manager that holds `key` (same async context), resolves at
   * once to a reentrant handle on the scope's lease (see {@link LocksOptions.reentrant}).
   *
   * @param key - The lock's name, e.g. `"orders:42"`: a non-empty string of at most 1,024 bytes of
   *   UTF-8 (`MAX_NAME_BYTES`), not starting with `}`. Each name leaves a small fence counter in
   *   Redis (`<prefix>{<name>}:fence`) for 24 hours plus the TTL after its last acquire
   *   (`FENCE_RETENTION`), however briefly it was held: see docs/operations.md, "Lock names".
   */
  acquire(key: string, options?: AcquireOptions): Promise<Lease>;
  /**
   * Tries once: resolves to a lease, or `null` when the lock is held (or when callers of this
   * manager are already waiting for it: tryAcquire does not jump their queue). With `reentrant`,
   * inside a scope that holds `key`, resolves to a reentrant handle, as `acquire` does.
   */
  tryAcquire(key: string, options?: Omit<AcquireOptions, 'wait'>): Promise<Lease | null>;
  /**
   * Runs `fn` while holding `key`, renewing the lease by default, and releases it when `fn`
   * returns or throws. Rejects with `LeaseLostError` when the lease was lost before the release,
   * even if `fn` succeeded: its work was not fully protected.
   *
   * With `reentrant` (manager or call option), `fn` runs in a scope (an `AsyncLocalStorage`
   * context of this manager) that records the lease: a reentrant `acquire`, `tryAcquire` or
   * `withLock` of `key` made inside it joins that lease (`lease.holds` counts the holds) instead of
   * waiting, and the lock is released when the outermost scope ends. Callers in other async
   * contexts still wait.
   *
   * @example
   * ```ts
   * const locks = createLocks({ redis, reentrant: true });
   * await locks.withLock('account:7', async (outer) => {
   *   await locks.withLock('account:7', async (inner) => {
   *     inner.holds; // 2: the same lock (inner.fence === outer.fence), not released by this scope's end
   *   });
   * }); // released here
   * ```
   *
   * @param key - The lock's name, first (at most 1,024 bytes of UTF-8; see {@link Locks.acquire}); the callback goes after it.
   */
  withLock<T>(key: string, fn: (lease: Lease) => Promise<T> | T): Promise<T>;
  withLock<T>(key: string, options: AcquireOptions, fn: (lease: Lease) => Promise<T> | T): Promise<T>;
  /**
   * Acquires every lock of `keys`, all or nothing, waiting up to `wait` ms in all. The keys are
   * taken in one fixed global order (sorted by code unit), so callers with overlapping sets never
   * deadlock; on one Redis (not Cluster, not with `replication`) a first attempt takes them all
   * in one script when all are free. When a key cannot be had (timeout, abort, error) the keys
   * already taken are released before the call rejects, as {@link Locks.acquire} would. `keys`
   * must be a non-empty array of distinct names. With `reentrant`, a key that a scope of this
   * context holds is joined (a reentrant handle, as `acquire` gives) and the others are taken;
   * a key whose scope lease was lost rejects the call with its `LeaseLostError`, taking nothing.
   */
  acquireAll(keys: readonly string[], options?: AcquireOptions): Promise<MultiLease>;
  /**
   * Tries once to take every lock of `keys`: resolves to a multi-lease, or `null` when any of
   * them is held (or waited for by callers of this manager). Never leaves some of them held.
   */
  tryAcquireAll(keys: readonly string[], options?: Omit<AcquireOptions, 'wait'>): Promise<MultiLease | null>;
  /**
   * Runs `fn` while holding every lock of `keys` (renewed by default), and releases them all when
   * it returns or throws; rejects with `LeaseLostError` when any part was lost before the release.
   * With `reentrant`, `fn` runs in a scope for each key taken (a reentrant call of one of them
   * inside joins its part), and keys that scopes of the caller's context hold are joined, as
   * `acquireAll` joins them.
   */
  withLocks<T>(keys: readonly string[], fn: (lease: MultiLease) => Promise<T> | T): Promise<T>;
  withLocks<T>(keys: readonly string[], options: AcquireOptions, fn: (lease: MultiLease) => Promise<T> | T): Promise<T>;
  /**
   * Writes `value` to the resource key `resource` only if `fence` (a number, or a lease's fence) is
   * at least the highest fence the resource has accepted; rejects with {@link StaleFenceError}
   * otherwise. The resource is stored as a hash `{ value, fence }` under your own key (no prefix).
   */
  fencedWrite(resource: string, value: string, fence: number | Lease): Promise<void>;
  /** Reads a resource written by {@link Locks.fencedWrite}; `null` if never written. */
  fencedRead(resource: string): Promise<FencedValue | null>;
  /** A snapshot of the lock `key`: held or not, TTL left, last fence, queued waiters, and its holder if recorded. */
  inspect(key: string): Promise<LockInfo>;
  /**
   * The locks held now under this manager's prefix whose name matches the Redis glob `pattern`
   * (default `*`), sorted by name. Uses SCAN (on Redis Cluster, on every master): fine for
   * operators and dashboards, not for a hot path.
   */
  list(pattern?: string): Promise<LockInfo[]>;
  /**
   * An operator's escape hatch: ends whichever lease holds `key` and passes the lock on to the
   * next waiter, as its holder's release would. The holder is not told; its next renewal fails,
   * so a watchdog-renewed lease reports the loss through its signal. Resolves to what was broken
   * (its holder, if recorded), or `null` when the lock was free.
   */
  forceRelease(key: string): Promise<LockInfo | null>;
  /**
   * A counting semaphore named `name` with `limit` permits, shared with every manager on the
   * same backend and prefix. Each permit is a lease (TTL, fence, watchdog). Not over Redlock
   * ({@link UnsupportedError}). `name` follows the rules of a lock's name (see {@link Locks.acquire}).
   */
  semaphore(name: string, options: SemaphoreOptions): Semaphore;
  /**
   * A read-write lock named `name`: many readers at once, or one writer. Waiters are served first
   * come, first served across processes, so a waiting writer holds back the readers that come
   * after it (a stream of readers cannot starve it), and the readers queued behind a writer go in
   * together when it releases. Each read or write is a Lease. Not over Redlock. With
   * `reentrant`, `withRead` and `withWrite` open scopes that nested reads (and, in a write scope,
   * writes) join; a write inside a read scope is refused with `UpgradeDeadlockError`.
   */
  readWriteLock(name: string, options?: ReadWriteLockOptions): ReadWriteLock;
  /**
   * A fair lock named `name`: one holder at a time, served strictly first come, first served
   * across processes (no barging, no in-process hand-off). A waiter keeps its place by
   * re-checking at least every `recheck` ms; one that died is passed over at the next release
   * (its inbox has no listener), and otherwise drops out within 3 × `recheck` ms of its last
   * check. Not over Redlock.
   */
  fairLock(name: string, options?: FairLockOptions): FairLock;
  /**
   * Stops waits in progress (they reject with a `LockAbortedError`), releases the leases this
   * manager holds, and closes the connections latchkey made. A borrowed client stays open.
   * With `{ release: false }` the leases it holds are not released but left to expire at their
   * TTL ({@link Lease.letExpire}): for a job that must not run again in the same period.
   */
  close(options?: CloseOptions): Promise<void>;
}
