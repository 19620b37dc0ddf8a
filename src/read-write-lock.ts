import type { Lease } from './lease/lease.js';
import { splitCallback } from './manager/run-holding.js';
import { ACQUIRE_OPTIONS, type AcquireOptions } from './options.js';
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

/** A read-write lock over a semaphore of {@link MAX_PERMITS} permits: readers take one, a writer all; the queue is first come, first served. */
export function readWriteLockOver(sem: Semaphore): ReadWriteLock {
  const as = (permits: number) => (options: AcquireOptions | undefined): PermitOptions => ({ ...checkOptions<AcquireOptions>(options, ACQUIRE_OPTIONS, 'options'), permits });
  const reader = as(1);
  const writer = as(MAX_PERMITS);
  const scoped = (permits: (o: AcquireOptions | undefined) => PermitOptions) =>
    (<T>(optionsOrFn: AcquireOptions | ((lease: Lease) => Promise<T> | T), maybeFn?: (lease: Lease) => Promise<T> | T): Promise<T> => {
      let split;
      try {
        split = splitCallback(optionsOrFn, maybeFn, 'the lock is held');
      } catch (error) {
        return Promise.reject(error);
      }
      return sem.withPermit(permits(split.options), split.fn);
    }) as ReadWriteLock['withRead'];
  return {
    name: sem.name,
    read: (options) => sem.acquire(reader(options)),
    tryRead: (options) => sem.tryAcquire(reader(options)),
    write: (options) => sem.acquire(writer(options)),
    tryWrite: (options) => sem.tryAcquire(writer(options)),
    withRead: scoped(reader),
    withWrite: scoped(writer),
  };
}
