/**
 * Every error latchkey throws is a {@link LockError} with a stable `code`, so callers can
 * branch on `err.code` without parsing messages. Context fields say which lock and why;
 * `cause` carries the underlying error (a Redis reply error, a socket error) when there is one.
 */

/** The stable codes of {@link LockError}. */
export type LockErrorCode =
  | 'INVALID_OPTION'
  | 'LOCK_TIMEOUT'
  | 'ABORTED'
  | 'LEASE_LOST'
  | 'LEASE_RELEASED'
  | 'BACKEND_ERROR'
  | 'UNREACHABLE'
  | 'WRONG_TYPE'
  | 'STALE_FENCE'
  | 'SUPPRESSED'
  | 'UPGRADE_DEADLOCK'
  | 'CLOSED'
  | 'QUORUM'
  | 'NOT_REPLICATED'
  | 'UNSUPPORTED';

import { describeOutcome, type QuorumOutcome } from './backend/quorum.js';
import { redactCommandArgs } from './redact.js';

/** Base class of every latchkey error. */
export class LockError extends Error {
  readonly code: LockErrorCode;
  constructor(code: LockErrorCode, message: string, options?: { cause?: unknown }) {
    // The cause's command arguments (a token, a password: see redact.ts) never travel with it.
    super(message, options?.cause === undefined ? undefined : { cause: redactCommandArgs(options.cause) });
    this.name = 'LockError';
    this.code = code;
  }
}

/** An option or argument was missing, of the wrong type, or out of range. */
export class InvalidOptionError extends LockError {
  /** The option that was wrong (`ttl`, `wait`, `key`, `redis`, …). */
  readonly option: string;
  /** `got`, when given, says what was received instead of a description of `received`. */
  constructor(option: string, expected: string, received: unknown, got?: string) {
    super('INVALID_OPTION', `Invalid option "${option}": expected ${expected}, got ${got ?? describe(received)}.`);
    this.name = 'InvalidOptionError';
    this.option = option;
  }
}

/**
 * `acquire` waited its whole `wait` budget and the lock was still held by someone else. When the
 * holder's manager registered who it is (the `holder` option of createLocks, on by default),
 * `holder` names it and so does the message.
 */
export class LockTimeoutError extends LockError {
  readonly key: string;
  /** How long the caller waited, in milliseconds, rounded to 0.1 ms. */
  readonly waited: number;
  /** How many times the backend was asked (0 when the wait queued in memory behind callers of this manager). */
  readonly attempts: number;
  /** Redlock: how the nodes voted on the last attempt. */
  readonly outcome: QuorumOutcome | undefined;
  /**
   * Who held the lock, as its manager registered itself with the `holder` option of createLocks
   * (`<hostname> pid <pid>` by default, else the string given: the `who` that `locks.inspect()`
   * shows), found from the tag of the token the last attempt met (looked up for at most 50 ms).
   * A description the holder wrote, never a token. `undefined` when the holder registers nothing
   * (`holder: false`), its registration was not found in time, or (over Redlock) no majority of
   * the nodes named the same tag.
   */
  readonly holder: string | undefined;
  /** True when another lease of this same manager (this process) held the lock all along. */
  readonly heldHere: boolean;
  constructor(key: string, waited: number, attempts: number, outcome?: QuorumOutcome, holder?: string, heldHere = false) {
    const by = heldHere
      ? `another lease of this same manager (in this process${holder === undefined ? '' : `, recorded as ${JSON.stringify(holder)}`})`
      : holder === undefined
        ? 'another owner'
        : JSON.stringify(holder);
    const tried = attempts === 0 ? "waited in this manager's queue; Redis was not asked" : `${attempts} attempt${attempts === 1 ? '' : 's'}`;
    super(
      'LOCK_TIMEOUT',
      `Timed out after ${Math.round(waited)} ms waiting for lock "${key}" (${tried}); ` +
        `it is still held by ${by}. Raise \`wait\`, or use tryAcquire to fail at once.` +
        (outcome ? ` Last attempt: ${describeOutcome(outcome)}.` : ''),
    );
    this.name = 'LockTimeoutError';
    this.key = key;
    this.waited = roundMs(waited);
    this.attempts = attempts;
    this.outcome = outcome;
    this.holder = holder;
    this.heldHere = heldHere;
  }
}

/** A wait was cut short because its manager was closed. (An `AbortSignal` rejects with its own `reason`.) */
export class LockAbortedError extends LockError {
  readonly key: string;
  constructor(key: string, why: string) {
    super('ABORTED', `Stopped waiting for lock "${key}": ${why}.`);
    this.name = 'LockAbortedError';
    this.key = key;
  }
}

/** Why a lease is no longer held. */
export type LeaseLostReason =
  /** The lease's validity ran out on the local monotonic clock before it was extended. */
  | 'expired'
  /** The lock key was gone when latchkey asked (it expired in Redis, or was deleted). */
  | 'gone'
  /** The lock key holds another owner's token: the lease expired and someone else took it. */
  | 'taken'
  /** An operator broke it on purpose: `Locks.forceRelease` or `latchkey release --force` (one Redis; elsewhere such a loss reads `gone` or `taken`). */
  | 'forced'
  /** Renewal could not reach the backend before the validity ran out. */
  | 'unreachable';

/**
 * The lease is no longer held: found by `release()`, `extend()` or the watchdog, or because its
 * validity ran out. `lease.signal` aborts with this error as its reason.
 */
export class LeaseLostError extends LockError {
  readonly key: string;
  readonly fence: number;
  readonly reason: LeaseLostReason;
  constructor(key: string, fence: number, reason: LeaseLostReason, options?: { cause?: unknown }) {
    const cause = options?.cause instanceof Error ? ` Cause: ${options.cause.message}` : '';
    super('LEASE_LOST', `Lease on lock "${key}" (fence ${fence}) is lost: ${LOST_TEXT[reason]}.${cause}`, options);
    this.name = 'LeaseLostError';
    this.key = key;
    this.fence = fence;
    this.reason = reason;
  }
}

const LOST_TEXT: Record<LeaseLostReason, string> = {
  expired: 'its validity ran out before it was extended or released',
  gone: 'the lock key no longer exists (it expired or was deleted)',
  taken: 'the lock is now held by another owner (the lease expired and was taken)',
  forced: 'an operator force-released it (Locks.forceRelease or `latchkey release --force`); the next waiter may hold it now',
  unreachable: 'the backend could not be reached to renew it before its validity ran out',
};

/** The reason `lease.signal` carries after a normal `release()`. */
export class LeaseReleasedError extends LockError {
  readonly key: string;
  constructor(key: string) {
    super('LEASE_RELEASED', `Lease on lock "${key}" was released.`);
    this.name = 'LeaseReleasedError';
    this.key = key;
  }
}

/** The backend (Redis) failed: connection errors, script errors, replies of an unexpected shape. `cause` has the original. */
export class BackendError extends LockError {
  /** The operation that failed: `acquire`, `release`, `extend`, `fencedWrite`, … */
  readonly operation: string;
  constructor(operation: string, message: string, options?: { cause?: unknown; code?: 'BACKEND_ERROR' | 'WRONG_TYPE' | 'UNREACHABLE' }) {
    super(options?.code ?? 'BACKEND_ERROR', `${operation} failed: ${message}`, options);
    this.name = 'BackendError';
    this.operation = operation;
  }
}

/**
 * Redis did not answer: latchkey stopped waiting for a reply, on its own clock, whatever the
 * client's retry settings (the client may still be reconnecting; a command it sends later is
 * harmless: see docs/safety.md). Not a lock held by someone else: nothing was seen of the lock.
 */
export class UnreachableError extends BackendError {
  /** The server, as `host:port`, when known. */
  readonly server: string | undefined;
  /** How long latchkey waited for a reply, ms, rounded to 0.1 ms. */
  readonly waited: number;
  constructor(operation: string, what: string, server: string | undefined, waited: number, cause?: unknown) {
    super(
      operation,
      `no reply from Redis${server ? ` at ${server}` : ''} to ${what} within ${Math.round(waited)} ms` +
        `${cause instanceof Error ? ` (last error: ${cause.message})` : ''}. ` +
        'Check that Redis is running and reachable; the client keeps its own retry settings (see "When Redis is down" in the README).',
      { code: 'UNREACHABLE', ...(cause === undefined ? {} : { cause }) },
    );
    this.name = 'UnreachableError';
    this.server = server;
    this.waited = roundMs(waited);
  }
}

/** A key latchkey uses holds a value of another type (Redis WRONGTYPE): a name clash with other data. */
export class WrongTypeError extends BackendError {
  readonly key: string;
  constructor(operation: string, key: string, cause: unknown) {
    super(
      operation,
      `key "${key}" holds a value of another type than latchkey expects (WRONGTYPE). ` +
        'Another part of the application uses the same key: choose another lock name or `prefix`.',
      { cause, code: 'WRONG_TYPE' },
    );
    this.name = 'WrongTypeError';
    this.key = key;
  }
}

/**
 * Redlock: a majority of the nodes could not be reached (or did not answer in time), so the
 * operation could neither succeed nor be known to have failed. `outcome` says how each node voted
 * and why each failing node failed; `cause` is the first node error.
 */
export class QuorumError extends LockError {
  readonly key: string;
  /** `acquire`, `extend`, `release`. */
  readonly operation: string;
  readonly outcome: QuorumOutcome;
  constructor(key: string, outcome: QuorumOutcome) {
    const first = outcome.votes.find((v) => v.vote === 'error');
    super(
      'QUORUM',
      `${outcome.operation} of lock "${key}" reached no quorum: ${describeOutcome(outcome)}. ` +
        'Check that a majority of the Redlock nodes is up and reachable.',
      { cause: first?.vote === 'error' ? first.error : undefined },
    );
    this.name = 'QuorumError';
    this.key = key;
    this.operation = outcome.operation;
    this.outcome = outcome;
  }
}

/**
 * With `replication: { shortfall: 'fail' }`: fewer replicas than asked acknowledged an acquire
 * within the timeout, so the lock was released again rather than handed out as a lease a failover
 * could lose.
 */
export class ReplicationError extends LockError {
  readonly key: string;
  readonly requested: number;
  readonly acknowledged: number;
  /** What was not acknowledged: an acquire (the lock was released again) or an extend (the lease keeps its previous validity). */
  readonly operation: 'acquire' | 'extend';
  constructor(key: string, requested: number, acknowledged: number, timeout: number, operation: 'acquire' | 'extend' = 'acquire') {
    super(
      'NOT_REPLICATED',
      operation === 'acquire'
        ? `Acquire of lock "${key}" was acknowledged by ${acknowledged} of the ${requested} replica(s) asked for within ${timeout} ms, ` +
            'so it was released. Check the replicas (INFO replication), raise replication.timeout, ' +
            "or use shortfall: 'accept' to get a lease marked replicated: false."
        : `Extend of lock "${key}" was acknowledged by ${acknowledged} of the ${requested} replica(s) asked for within ${timeout} ms, ` +
            'so the lease keeps its previous validity (a replica promoted now would expire it then). Check the replicas (INFO replication).',
    );
    this.name = 'ReplicationError';
    this.key = key;
    this.requested = requested;
    this.acknowledged = acknowledged;
    this.operation = operation;
  }
}

/** The operation does not exist on this backend (for example a fenced write over Redlock). */
export class UnsupportedError extends LockError {
  constructor(what: string, instead: string) {
    super('UNSUPPORTED', `${what} is not supported here: ${instead}.`);
    this.name = 'UnsupportedError';
  }
}

/** A fenced write was refused because the resource has already accepted a higher fence. */
export class StaleFenceError extends LockError {
  readonly resource: string;
  readonly fence: number;
  readonly highest: number;
  constructor(resource: string, fence: number, highest: number) {
    super(
      'STALE_FENCE',
      `Write to "${resource}" refused: fence ${fence} is older than fence ${highest} the resource has already accepted. ` +
        'This writer lost its lease; stop and do not retry with the same fence.',
    );
    this.name = 'StaleFenceError';
    this.resource = resource;
    this.fence = fence;
    this.highest = highest;
  }
}

/** The manager was closed; it takes no more calls. */
export class ClosedError extends LockError {
  constructor() {
    super('CLOSED', 'This latchkey manager is closed; create a new one with createLocks().');
    this.name = 'ClosedError';
  }
}

/**
 * Thrown by `withLock` when the callback threw and the release then failed too, like the
 * platform's `SuppressedError` for `await using`: `error` is the release failure and
 * `suppressed` the callback's error.
 */
export class LockSuppressedError extends LockError {
  readonly error: unknown;
  readonly suppressed: unknown;
  constructor(error: unknown, suppressed: unknown) {
    super('SUPPRESSED', 'The critical section threw, and releasing its lease failed too (see `error` and `suppressed`).', {
      cause: error,
    });
    this.name = 'LockSuppressedError';
    this.error = error;
    this.suppressed = suppressed;
  }
}

/**
 * A write of a read-write lock asked for inside a reentrant read scope of that lock (manager
 * option `reentrant`, same manager and async context). It would wait for the read lease its own
 * caller holds, which cannot end while it waits: a read lease is never upgraded. End the read
 * first, or take the write lease from the start (reads inside a write scope join it).
 */
export class UpgradeDeadlockError extends LockError {
  /** The read-write lock's name. */
  readonly key: string;
  constructor(key: string) {
    super(
      'UPGRADE_DEADLOCK',
      `A write of read-write lock "${key}" was asked for inside a read scope of the same lock: it would wait for that read, which cannot ` +
        'end while it waits (a read lease is never upgraded). End the read first, or take the write lease from the start.',
    );
    this.name = 'UpgradeDeadlockError';
    this.key = key;
  }
}

/** A duration for a message or an error's field: milliseconds to one decimal (no float noise such as 300.5638410000001). */
function roundMs(ms: number): number {
  return Math.round(ms * 10) / 10;
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (value === undefined) return 'undefined';
  if (typeof value === 'string') return value.length > 60 ? `a string of length ${value.length}` : JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean') return `${typeof value} ${String(value)}`;
  if (typeof value === 'function') return 'a function';
  if (Array.isArray(value)) return `an array of length ${value.length}`;
  const ctor = (value as { constructor?: { name?: string } }).constructor?.name;
  return ctor && ctor !== 'Object' ? `an instance of ${ctor}` : 'an object';
}
