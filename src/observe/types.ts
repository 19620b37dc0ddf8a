import type { MeterProvider, TracerProvider } from '@opentelemetry/api';
import type { QuorumOutcome } from '../backend/quorum.js';
import type { LeaseLostError, LeaseLostReason } from '../errors.js';

/**
 * A structured logger: the subset of pino's API latchkey uses (`logger.warn(obj, msg)`), so a
 * pino logger (or a child of one) fits as it is; so does anything with these four methods.
 * latchkey never logs a lease's token, a password or a URL.
 */
export interface Logger {
  /** Routine events: an acquire, a release, a renewal. */
  debug(obj: object, msg?: string): void;
  /** Noteworthy but expected: an acquire that timed out or was aborted. */
  info(obj: object, msg?: string): void;
  /** Something to look at: a lease lost, a renewal that failed, a quorum not reached, a hook that threw. */
  warn(obj: object, msg?: string): void;
  /** An acquire that failed with an error (the backend could not be reached, …). */
  error(obj: object, msg?: string): void;
}

/** Which primitive an event is about: a lock, a semaphore's permits, a read-write lock, a fair lock. */
export type LockKind = 'lock' | 'semaphore' | 'read-write' | 'fair';

/**
 * How an acquire ended: `acquired`; `busy` (a `tryAcquire` that found the lock held); `timeout`
 * (the wait ran out); `aborted` (its signal, or the manager's `close()`); `error` (the backend
 * failed, or Redlock reached no quorum).
 */
export type AcquireOutcome = 'acquired' | 'busy' | 'timeout' | 'aborted' | 'error';

/** What every event carries. */
export interface LockEventBase {
  /** The lock's name (for a semaphore, read-write or fair lock: its name). */
  readonly key: string;
  /** Which primitive. */
  readonly kind: LockKind;
  /** The manager's key prefix (`latchkey:` by default). */
  readonly prefix: string;
  /** The manager's backend, as `locks.backend` names it. */
  readonly backend: string;
}

/** A lease was handed out by `acquire`, `tryAcquire` or `withLock` (or a semaphore's, …). */
export interface AcquiredEvent extends LockEventBase {
  /** The lease's fencing token. */
  readonly fence: number;
  /** How long the call took, in ms (its wait included). */
  readonly duration: number;
  /** Whether the lock was held (here or elsewhere) when the call first looked, so that it had to wait. */
  readonly contended: boolean;
}

/** An acquire ended without a lease. */
export interface AcquireFailedEvent extends LockEventBase {
  /** Why: `busy`, `timeout`, `aborted` or `error`. */
  readonly outcome: Exclude<AcquireOutcome, 'acquired'>;
  /** How long the call took, in ms. */
  readonly duration: number;
  /** Whether the lock was held when the call first looked. */
  readonly contended: boolean;
  /** The error the call rejected with (none for `busy`). */
  readonly error?: unknown;
}

/** A lease was released by its holder. */
export interface ReleasedEvent extends LockEventBase {
  /** The lease's fencing token. */
  readonly fence: number;
  /** How long it was held, in ms. */
  readonly held: number;
  /**
   * How it ended: `released` (its release reached the backend), or `expired`: it was left to
   * expire (`lease.letExpire()`, or `close({ release: false })`) and its TTL ran out, as asked.
   */
  readonly end: LeaseEnd;
}

/** How a lease that was not lost ended: see {@link ReleasedEvent.end}. */
export type LeaseEnd = 'released' | 'expired';

/** A lease was lost: it expired, its key was deleted, it was taken, or renewals could not reach the backend. */
export interface LostEvent extends LockEventBase {
  /** The lease's fencing token. */
  readonly fence: number;
  /** How long it was held until the loss was noticed, in ms. */
  readonly held: number;
  /** Why it was lost. */
  readonly reason: LeaseLostReason;
  /** The error `lease.signal` aborted with. */
  readonly error: LeaseLostError;
}

/** A watchdog renewal extended a lease. */
export interface RenewedEvent extends LockEventBase {
  /** The lease's fencing token. */
  readonly fence: number;
}

/**
 * A watchdog renewal failed: the lease was found lost (its {@link LostEvent} came just before this
 * one, and ended the hold span), or the backend could not be reached (the watchdog tries again
 * while validity remains).
 */
export interface RenewFailedEvent extends LockEventBase {
  /** The lease's fencing token. */
  readonly fence: number;
  /** What the renewal rejected with. */
  readonly error: unknown;
}

/** Redlock: an acquire or a renewal reached no majority of the nodes (nodes failed or timed out). */
export interface QuorumFailedEvent extends LockEventBase {
  /** `acquire` or `extend`. */
  readonly operation: string;
  /** How each node voted. */
  readonly outcome: QuorumOutcome;
}

/**
 * At start, the Redis server's `maxmemory-policy` was found to evict keys with an expiry (any
 * `volatile-*` or `allkeys-*` policy): under memory pressure Redis can delete a lock key while its
 * holder still counts its lease valid, and a second holder gets the lock. See docs/operations.md,
 * "Eviction". Reported once per server a manager connects to.
 */
export interface EvictionPolicyEvent {
  /** The manager's key prefix. */
  readonly prefix: string;
  /** The manager's backend, as `locks.backend` names it. */
  readonly backend: string;
  /** Which server, on Redlock (`node 1 (127.0.0.1:6380)`); absent for a single Redis. */
  readonly node?: string;
  /** The server's `maxmemory-policy`, e.g. `allkeys-lru`. */
  readonly policy: string;
  /** The server's `maxmemory` in bytes (0: no limit set yet, so nothing is evicted until one is), or null if unread. */
  readonly maxmemory: number | null;
}

/**
 * Functions latchkey calls as things happen (option `hooks` of `createLocks`), each with a plain
 * object describing the event. They are called synchronously and should return quickly; one that
 * throws is reported to the `logger` (as a warning) and otherwise ignored: a hook can never break
 * a lock. Payloads carry no token.
 */
export interface LockHooks {
  /** A lease was acquired. */
  readonly acquired?: (event: AcquiredEvent) => void;
  /** An acquire ended without a lease (busy, timeout, aborted, error). */
  readonly acquireFailed?: (event: AcquireFailedEvent) => void;
  /** A lease was released. */
  readonly released?: (event: ReleasedEvent) => void;
  /** A lease was lost. */
  readonly lost?: (event: LostEvent) => void;
  /** A watchdog renewal succeeded. */
  readonly renewed?: (event: RenewedEvent) => void;
  /** A watchdog renewal failed. */
  readonly renewFailed?: (event: RenewFailedEvent) => void;
  /** Redlock reached no quorum. */
  readonly quorumFailed?: (event: QuorumFailedEvent) => void;
  /**
   * At start: a server's `maxmemory-policy` can evict lock keys. Giving this hook (or a `logger`,
   * which gets the same as a warning) makes the manager read the policy with `CONFIG GET` once per
   * server; a refused `CONFIG GET` (ACLs, managed services) skips the check silently.
   */
  readonly evictionPolicy?: (event: EvictionPolicyEvent) => void;
}

/**
 * Observability options of `createLocks`. With none of them, and no OpenTelemetry SDK registered
 * globally when the manager is created, latchkey records nothing and prints nothing, at no cost.
 */
export interface ObservabilityOptions {
  /** A pino-compatible logger for structured records of lock events. Default: none (nothing is printed). */
  readonly logger?: Logger;
  /** Functions called on lock events: see {@link LockHooks}. */
  readonly hooks?: LockHooks;
  /**
   * The OpenTelemetry meter provider to record metrics with. Default: the global one
   * (`metrics.getMeterProvider()` of `@opentelemetry/api`) as it is when the manager is created;
   * without an SDK that is a no-op and latchkey skips metrics entirely.
   */
  readonly meterProvider?: MeterProvider;
  /**
   * The OpenTelemetry tracer provider for `latchkey.acquire` spans. Default: the global one, when
   * an SDK has registered one before the manager is created; otherwise no spans.
   */
  readonly tracerProvider?: TracerProvider;
  /**
   * Maps a lock name to a low-cardinality group recorded as the metric attribute
   * `latchkey.key.group` (e.g. `(name) => name.split(':')[0]` makes `orders:42` count as
   * `orders`). Default: none; metrics never carry lock names themselves.
   */
  readonly keyGroup?: (key: string) => string;
}
