/** How a wait that did not get the lock ends (see Waiter): its error, and what it leaves behind in the backend. */
import type { Backend } from '../backend/backend.js';
import type { LockKeys } from '../keys.js';
import { undecided, type QuorumOutcome } from '../backend/quorum.js';
import { now } from '../clock.js';
import { LockTimeoutError, QuorumError, UnreachableError } from '../errors.js';

/** What of a wait its give-up error tells. */
export interface EndedWait {
  readonly keys: { readonly name: string };
  /** Monotonic ms. */
  readonly started: number;
  readonly attempts: number;
  /** True once an attempt got a reply. */
  readonly replied: boolean;
  /** The refusal of the last attempt (a Cluster slot that migrates), if it was refused. */
  readonly refused: Error | undefined;
  /** The last attempt the client's own timeout ended, if one did. */
  readonly timedOut: Error | undefined;
  /** Who held the lock at the last attempt that found it held, when known. */
  readonly heldBy: string | undefined;
}

/** The error of an attempt that got no reply by the deadline: Redis unreachable if no attempt of the wait got one, else a timeout. */
export function noReplyError(wait: EndedWait, backend: Pick<Backend, 'server' | 'lastError'>): Error {
  if (wait.refused) return wait.refused; // the attempts before were refused: so, likely, is this one
  const waited = now() - wait.started;
  if (wait.replied) return new LockTimeoutError(wait.keys.name, waited, wait.attempts, undefined, wait.heldBy);
  const what = `${wait.attempts} attempt${wait.attempts === 1 ? '' : 's'} at lock "${wait.keys.name}"`;
  return new UnreachableError('acquire', what, backend.server, waited, backend.lastError?.() ?? wait.timedOut);
}

/** The error of a wait that ran out: Redlock's quorum error when node errors left it undecided, else a timeout. */
export function giveUpError(wait: EndedWait, backend: Pick<Backend, 'server' | 'lastError'>, outcome: QuorumOutcome | undefined): Error {
  if (wait.refused || !wait.replied) return noReplyError(wait, backend); // refused, or every attempt timed out in the client
  if (outcome && undecided(outcome)) return new QuorumError(wait.keys.name, outcome);
  return new LockTimeoutError(wait.keys.name, now() - wait.started, wait.attempts, outcome, wait.heldBy);
}

/**
 * Takes a waiter that leaves without a lease out of the queue (`queued`: it may be in it), and
 * releases its token when a release had granted it the lock, or whatever `leave` says when
 * `giveBack` (it won too late, or a timed-out attempt may have taken the lock; a timed-out one is
 * repeated by the backend after the client's late sends: late-acquires.ts). Sent after its
 * attempts on the same connection, it runs after any of them still in flight. The work is kept in
 * `leaving` until done (a manager's close waits for it).
 */
export function leaveAndGiveBack(
  backend: Pick<Backend, 'leave' | 'release'>,
  leaving: Set<Promise<unknown>>,
  waiter: { readonly keys: LockKeys; readonly member: string; readonly token: string },
  queued: boolean,
  giveBack: boolean,
): void {
  const { keys, member, token } = waiter;
  const left = queued ? backend.leave(keys, member, token) : Promise.resolve(false);
  const cleanUp: Promise<unknown> = left
    .catch((error: unknown) => {
      if (giveBack) return true; // the lease it may hold must go back still
      throw error;
    })
    .then((granted) => (granted || giveBack ? backend.release(keys, token) : undefined))
    .catch(() => {})
    .finally(() => leaving.delete(cleanUp));
  leaving.add(cleanUp);
}
