import type { Lease } from './lease/lease.js';
import { splitCallback } from './manager/run-holding.js';
import { isReentrant, type Settings } from './manager/settings.js';
import { ACQUIRE_OPTIONS, type AcquireOptions } from './options.js';
import type { HoldMode, Reentrancy } from './reentrancy.js';
import { MAX_PERMITS, type PermitOptions, type Semaphore } from './semaphore.js';
import { checkOptions } from './validate.js';
import type { WaitStrategyName } from './wait/strategy.js';

/** Options of {@link Locks.readWriteLock}: defaults for its calls. */
export interface ReadWriteLockOptions {
  /** Default lease TTL, ms. Default: the manager's. */
  readonly ttl?: number;
  /** Default longest wait, ms. Default: the manager's. */
  readonly wait?: number;
  /** Default waiting strategy. Default: the manager's. */
  readonly strategy?: WaitStrategyName;
}

/**
 * A read-write lock: many readers at once, or one writer, over every process. Built on the
 * counting semaphore: a reader takes one permit, a writer all of them, and the wait queue is
 * first come, first served, so the policy is "FIFO, readers batched": a writer that is waiting
 * holds back every reader that came after it (no writer starvation), and when it releases, the
 * readers queued behind it go in together. Each read or write is a {@link Lease} of its own
 * (TTL, fence, signal, watchdog), so a crashed reader or writer frees the lock at its TTL.
 *
 * A read does not join a read its caller already holds: with a writer queued after that read, a
 * nested read waits behind the writer, which waits for the held read, until `wait` runs out. With
 * `reentrant` (manager or call option), `withRead` and `withWrite` open a scope: inside a read
 * scope a read (`read`, `tryRead`, `withRead`) joins the held read; inside a write scope reads and
 * writes join the write lease; a write inside a read scope is refused at once with
 * `UpgradeDeadlockError` (it would wait for its own read).
 */
export interface ReadWriteLock {
  readonly name: string;
  /** A read lease, waiting up to `wait` ms. */
  read(options?: AcquireOptions): Promise<Lease>;
  /** One attempt at a read lease: `null` while a writer holds or waits for the lock. */
  tryRead(options?: Omit<AcquireOptions, 'wait'>): Promise<Lease | null>;
  /** The write lease, waiting up to `wait` ms for the readers and writers ahead to finish. */
  write(options?: AcquireOptions): Promise<Lease>;
  /** One attempt at the write lease: `null` while anyone holds or waits for the lock. */
  tryWrite(options?: Omit<AcquireOptions, 'wait'>): Promise<Lease | null>;
  /** Runs `fn` under a read lease (renewed by default) and releases it. */
  withRead<T>(fn: (lease: Lease) => Promise<T> | T): Promise<T>;
  withRead<T>(options: AcquireOptions, fn: (lease: Lease) => Promise<T> | T): Promise<T>;
  /** Runs `fn` under the write lease (renewed by default) and releases it. */
  withWrite<T>(fn: (lease: Lease) => Promise<T> | T): Promise<T>;
  withWrite<T>(options: AcquireOptions, fn: (lease: Lease) => Promise<T> | T): Promise<T>;
}

export const READ_WRITE_LOCK_OPTIONS = ['ttl', 'wait', 'strategy'] as const;

/**
 * A read-write lock over a semaphore of {@link MAX_PERMITS} permits: readers take one, a writer
 * all; the queue is first come, first served. A reentrant call (manager or call option
 * `reentrant`) is first shown to the manager's reentrant scopes, which decide whether it joins a
 * read or write scope of this lock in its async context; `withRead` and `withWrite` open one.
 */
export function readWriteLockOver(sem: Semaphore, reentrancy: Reentrancy, settings: Pick<Settings, 'reentrant'>): ReadWriteLock {
  const name = sem.name;
  /** The semaphore's options for a read or write: the caller's, but `reentrant` (permits know nothing of scopes). */
  const permitOptions = (o: Partial<AcquireOptions>, mode: HoldMode): PermitOptions => {
    const given = Object.entries(o).filter(([option]) => option !== 'reentrant');
    return { ...Object.fromEntries(given), permits: mode === 'shared' ? 1 : MAX_PERMITS };
  };
  const take = async (mode: HoldMode, options: AcquireOptions | undefined, once: boolean): Promise<Lease | null> => {
    const o = checkOptions<AcquireOptions>(options, ACQUIRE_OPTIONS, 'options');
    const joined = isReentrant(settings, o) ? reentrancy.joinReadWrite(name, mode, o) : undefined;
    if (joined) return joined;
    return once ? sem.tryAcquire(permitOptions(o, mode)) : sem.acquire(permitOptions(o, mode));
  };
  const scoped = (mode: HoldMode) =>
    (async <T>(optionsOrFn: AcquireOptions | ((lease: Lease) => Promise<T> | T), maybeFn?: (lease: Lease) => Promise<T> | T): Promise<T> => {
      const { options, fn } = splitCallback(optionsOrFn, maybeFn, 'the lock is held');
      const o = checkOptions<AcquireOptions>(options, ACQUIRE_OPTIONS, 'options');
      if (!isReentrant(settings, o)) return sem.withPermit(permitOptions(o, mode), fn);
      return reentrancy.withReadWrite(name, mode, o, fn, (scope) => sem.acquire(permitOptions(scope, mode)));
    }) as ReadWriteLock['withRead'];
  return {
    name,
    read: async (options) => (await take('shared', options, false))!,
    tryRead: (options) => take('shared', options, true),
    write: async (options) => (await take('exclusive', options, false))!,
    tryWrite: (options) => take('exclusive', options, true),
    withRead: scoped('shared'),
    withWrite: scoped('exclusive'),
  };
}
