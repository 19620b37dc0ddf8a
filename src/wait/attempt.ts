import type { AcquireReply, Backend, QueueEntry } from '../backend/backend.js';
import { now } from '../clock.js';
import { Deadlines, type Deadline } from '../deadlines.js';
import { UnreachableError } from '../errors.js';
import type { LockKeys } from '../keys.js';

/** What ends an attempt besides its reply: the waiter's deadline, and its stop through `cancel`. A Waiter is one. */
export interface AttemptLimit {
  readonly deadline: number;
  readonly keys: LockKeys;
  readonly started: number;
  readonly attempts: number;
  cancel: ((reason: unknown) => void) | undefined;
  /** The error of an attempt that got no reply by the deadline. */
  noReply(): Error;
}

/** How long past its waiter's deadline an attempt in flight may still finish, ms. */
const ATTEMPT_GRACE = 250;

/**
 * Attempts in flight that have a deadline, on one timer for all of them: only a Redis that does
 * not answer ever leaves one to expire.
 */
const attemptDeadlines = new Deadlines();

/**
 * One acquire attempt; if its reply is lost, the lock is given back rather than left held until
 * its TTL. With `limit`, the attempt also ends at the deadline or when the waiter is stopped
 * (`limit.cancel`), even if Redis never answers (a partition, a frozen server: the command stays
 * queued in the client); a reply that comes after that and won the lock is given back. (A queue
 * entry it made is the waiter's to remove: see {@link Waiter.exit}.) One promise either way: the
 * hot path pays for a set entry, not for a wrapper.
 */
export function attempt(backend: Backend, keys: LockKeys, token: string, ttl: number, queue: QueueEntry | undefined, limit?: AttemptLimit): Promise<AcquireReply> {
  return new Promise<AcquireReply>((resolve, reject) => {
    let done = false;
    let entry: Deadline | undefined;
    const end = (): boolean => {
      if (done) return false;
      done = true;
      if (entry) attemptDeadlines.delete(entry);
      if (limit) limit.cancel = undefined;
      return true;
    };
    backend.acquire(keys, token, ttl, queue).then(
      (reply) => {
        if (end()) resolve(reply);
        else if (reply.acquired) backend.release(keys, token).catch(() => {}); // ended before it came
      },
      (error: unknown) => {
        backend.release(keys, token).catch(() => {});
        if (end()) reject(error);
      },
    );
    if (!limit || backend.boundsCalls) return;
    if (limit.deadline !== Infinity) {
      // A grace past the deadline: an attempt that a live Redis is about to answer (wait: 0 is
      // one attempt) finishes; only one that Redis does not answer is ended.
      entry = {
        at: Math.max(limit.deadline, now() + ATTEMPT_GRACE),
        expire: () => end() && reject(limit.noReply()),
      };
      attemptDeadlines.watch(entry);
    }
    limit.cancel = (reason) => end() && reject(reason);
  });
}

/** How long a one-shot attempt (`tryAcquire`) waits for its reply at most, ms: at most the TTL, for a reply after it is of no use. */
export const TRY_BOUND = 2000;

/** The limit of a one-shot attempt: its reply is not waited for past min(ttl, {@link TRY_BOUND}) ms. */
export function onceLimit(keys: LockKeys, ttl: number, server: string | undefined): AttemptLimit {
  const started = now();
  return {
    deadline: started + Math.min(ttl, TRY_BOUND),
    keys,
    started,
    attempts: 1,
    cancel: undefined,
    noReply: () => new UnreachableError('tryAcquire', `an attempt at lock "${keys.name}"`, server, now() - started),
  };
}
