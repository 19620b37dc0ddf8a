import type { Lease } from './lease/lease.js';
import type { AcquireOptions } from './options.js';
import type { WaitStrategyName } from './wait/strategy.js';

/** Options of {@link Locks.semaphore}. */
export interface SemaphoreOptions {
  /** How many permits the semaphore has (a positive integer). Every user of the semaphore must give the same limit. */
  readonly limit: number;
  /** Default lease TTL of a permit, ms. Default: the manager's. */
  readonly ttl?: number;
  /** Default longest wait, ms. Default: the manager's. */
  readonly wait?: number;
  /** Default waiting strategy. Default: the manager's. */
  readonly strategy?: WaitStrategyName;
}

/** Options of a semaphore's `acquire`: those of a lock (but `reentrant`: permits are not reentrant), and how many permits to take at once. */
export interface PermitOptions extends Omit<AcquireOptions, 'reentrant'> {
  /** How many permits to take, all or none (1 to the limit). Default 1. */
  readonly permits?: number;
}

/**
 * A counting semaphore: at most `limit` permits are held at a time, over every process. Each
 * acquire returns a {@link Lease} of its own (with a TTL, a fence, a signal, `extend`, `release`
 * and the watchdog), so the permits of a crashed process come back when its TTL runs out.
 *
 * Waiters are served first come, first served across processes: a waiter that needs more permits
 * than are free holds back the ones behind it. A release wakes the first waiter (no polling);
 * a crashed holder's permits are noticed at their expiry or the periodic re-check.
 */
export interface Semaphore {
  /** The semaphore's name. */
  readonly name: string;
  /** How many permits it has. */
  readonly limit: number;
  /** Takes `permits` (default 1), waiting up to `wait` ms; rejects like {@link Locks.acquire}. */
  acquire(options?: PermitOptions): Promise<Lease>;
  /** One attempt: a lease, or `null` when not enough permits are free (or others wait ahead). */
  tryAcquire(options?: Omit<PermitOptions, 'wait'>): Promise<Lease | null>;
  /** Runs `fn` while holding permits (renewed by default), and releases them when it returns or throws. */
  withPermit<T>(fn: (lease: Lease) => Promise<T> | T): Promise<T>;
  withPermit<T>(options: PermitOptions, fn: (lease: Lease) => Promise<T> | T): Promise<T>;
}

export const SEMAPHORE_OPTIONS = ['limit', 'ttl', 'wait', 'strategy'] as const;

/** The largest `limit` (and what a read-write lock's writer takes): 2^30 permits. */
export const MAX_PERMITS = 2 ** 30;
