import type { Lease } from './lease/lease.js';
import { splitCallback } from './manager/run-holding.js';
import { ACQUIRE_OPTIONS, type AcquireOptions } from './options.js';
import type { PermitOptions, Semaphore } from './semaphore.js';
import { checkOptions } from './validate.js';
import type { WaitStrategyName } from './wait/strategy.js';

/** Options of {@link Locks.fairLock}: defaults for its calls. */
export interface FairLockOptions {
  /** Default lease TTL, ms. Default: the manager's. */
  readonly ttl?: number;
  /** Default longest wait, ms. Default: the manager's. */
  readonly wait?: number;
  /** Default waiting strategy. Default: the manager's. `backoff` waiters do not queue, and queued ones go first. */
  readonly strategy?: WaitStrategyName;
}

/**
 * A fair lock: one holder at a time, served strictly in arrival order across processes. Unlike
 * {@link Locks.acquire}, nobody barges in when the lock is free while others wait, and callers
 * of one process get no hand-off ahead of other processes. A waiter keeps its place in the queue
 * by re-checking (at least every `recheck` ms, 1 s by default); a waiter that died is passed over
 * at the next release, since its inbox has no listener, and otherwise drops out within
 * 3 × `recheck` of its last check. Each acquisition is a {@link Lease}.
 */
export interface FairLock {
  readonly name: string;
  /** Waits up to `wait` ms for its turn. (No `reentrant`: a fair lock is never joined, as a semaphore is not.) */
  acquire(options?: Omit<AcquireOptions, 'reentrant'>): Promise<Lease>;
  /** One attempt: `null` when the lock is held or others wait for it. */
  tryAcquire(options?: Omit<AcquireOptions, 'wait' | 'reentrant'>): Promise<Lease | null>;
  /** Runs `fn` holding the lock (renewed by default) and releases it. */
  withLock<T>(fn: (lease: Lease) => Promise<T> | T): Promise<T>;
  withLock<T>(options: Omit<AcquireOptions, 'reentrant'>, fn: (lease: Lease) => Promise<T> | T): Promise<T>;
}

export const FAIR_LOCK_OPTIONS = ['ttl', 'wait', 'strategy'] as const;
/** What a fair lock's calls take: a lock's, but `reentrant`. */
const FAIR_ACQUIRE_OPTIONS = ACQUIRE_OPTIONS.filter((option) => option !== 'reentrant');

/** A fair lock over a semaphore of one permit: its queue is strictly first come, first served across processes. */
export function fairLockOver(sem: Semaphore): FairLock {
  const one = (options: AcquireOptions | undefined): PermitOptions => ({ ...checkOptions<AcquireOptions>(options, FAIR_ACQUIRE_OPTIONS, 'options'), permits: 1 });
  /** `call()`, whose checks of its arguments reject, as every acquire's do, rather than throw. */
  const rejecting = <R>(call: () => Promise<R>): Promise<R> => {
    try {
      return call();
    } catch (error) {
      return Promise.reject(error);
    }
  };
  return {
    name: sem.name,
    acquire: (options) => rejecting(() => sem.acquire(one(options))),
    tryAcquire: (options) => rejecting(() => sem.tryAcquire(one(options))),
    withLock: (<T>(optionsOrFn: AcquireOptions | ((lease: Lease) => Promise<T> | T), maybeFn?: (lease: Lease) => Promise<T> | T): Promise<T> =>
      rejecting(() => {
        const { options, fn } = splitCallback(optionsOrFn, maybeFn, 'the lock is held');
        return sem.withPermit(one(options), fn);
      })) as FairLock['withLock'],
  };
}
