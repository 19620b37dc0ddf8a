import type { AcquireReply, Backend, QueueEntry } from '../backend/backend.js';
import { now } from '../clock.js';
import { isClientTimeout, isSlotRefusal } from '../client/script-client.js';
import { settleBy } from '../deadlines.js';
import { UnreachableError } from '../errors.js';
import type { LockKeys } from '../keys.js';

/** What ends an attempt besides its reply: the waiter's deadline, and its stop through `cancel`. A Waiter is one. */
export interface AttemptLimit {
  /** Monotonic ms; Infinity: none. */
  readonly deadline: number;
  cancel: ((reason: unknown) => void) | undefined;
  /** The error of an attempt that got no reply by the deadline. */
  noReply(): Error;
  /**
   * True when the caller tries again with the same token after an attempt refused for where its
   * keys are ({@link isSlotRefusal}), or ended by the client's own timeout
   * ({@link isClientTimeout}): the first ran nothing, the second ran at most what the next attempt
   * does again (acquire.lua is idempotent for one token), and a give-back sent after either could
   * run after the next attempt won the lock (a client retrying it through a migration) and delete
   * that lease. The caller gives its token back when it leaves instead. (A Waiter's attempts.)
   */
  readonly retriesRefused?: boolean;
}

/** How long past its waiter's deadline an attempt in flight may still finish, ms. */
export const ATTEMPT_GRACE = 250;

/**
 * One acquire attempt (`sentAt`: when it is sent, if the caller just read the clock); if its reply
 * is lost, the lock is given back rather than left held until its TTL. With `limit`, the attempt
 * also ends at the deadline or when the waiter is stopped (`limit.cancel`), even if Redis never
 * answers (a partition, a frozen server: the command stays queued in the client); a reply that
 * comes after that and won the lock is given back. (A queue entry it made is the waiter's to
 * remove: see {@link Waiter.exit}.) A backend that bounds its own calls needs no limit.
 */
export function attempt(
  backend: Backend,
  keys: LockKeys,
  token: string,
  ttl: number,
  queue: QueueEntry | undefined,
  limit?: AttemptLimit,
  sentAt?: number,
): Promise<AcquireReply> {
  const acquiring = backend.acquire(keys, token, ttl, queue);
  const failed = (error: unknown, late = false): void => {
    // Not while the waiter goes on with the same token (see AttemptLimit.retriesRefused). But once
    // the attempt stopped being waited for (the deadline, a stop), the wait is over and its exit
    // has run, not knowing of this failure: the client's timeout says the command may still run
    // (a paused Redis runs it on resume), and what it wins is given back, after it on the same
    // connection (on a Cluster client that may send it later, repeated: late-acquires.ts).
    if (!late && limit?.retriesRefused && (isSlotRefusal(error) || isClientTimeout(error))) return;
    giveBack(backend, keys, token); // the reply may be what was lost
  };
  if (!limit || backend.boundsCalls) {
    return acquiring.catch((error: unknown) => {
      failed(error);
      throw error;
    });
  }
  // A grace past the deadline: an attempt that a live Redis is about to answer (wait: 0 is one
  // attempt) finishes; only one that Redis does not answer is ended.
  const at = limit.deadline === Infinity ? Infinity : Math.max(limit.deadline, (sentAt ?? now()) + ATTEMPT_GRACE);
  return settleBy(acquiring, at, () => limit.noReply(), {
    late: (reply) => {
      if (reply.acquired) giveBack(backend, keys, token); // ended before it came
    },
    failed,
    stoppable: limit,
  });
}

/** Releases `token`'s lock, if it holds it, in the background. */
function giveBack(backend: Backend, keys: LockKeys, token: string): void {
  backend.release(keys, token).catch(() => {});
}

/** How long a one-shot attempt (`tryAcquire`) waits for its reply at most, ms: at most the TTL, for a reply after it is of no use. */
export const TRY_BOUND = 2000;

/** The limit of a one-shot attempt: its reply is not waited for past min(ttl, {@link TRY_BOUND}) ms. */
export function onceLimit(keys: LockKeys, ttl: number, backend: Pick<Backend, 'server' | 'lastError'>): AttemptLimit {
  const started = now();
  return {
    deadline: started + Math.min(ttl, TRY_BOUND),
    cancel: undefined,
    noReply: () => new UnreachableError('tryAcquire', `an attempt at lock "${keys.name}"`, backend.server, now() - started, backend.lastError?.()),
  };
}
