/** A waiter's attempts at its lock and what they won: the first step of every wait, a lone caller's whole path. */
import type { AcquireReply } from '../backend/backend.js';
import { isClientTimeout, isSlotRefusal } from '../client/script-client.js';
import { now, validUntil } from '../clock.js';
import type { LockKeys } from '../keys.js';
import { attempt, type AttemptLimit } from './attempt.js';
import type { Listener } from './inbox-listener.js';
import { refusalDelay, type WaitStrategyName } from './strategy.js';
import type { Attempt, Grant, WaitContext } from './wait-context.js';

/** What an attempt reads and records of its waiter (a `Waiter` is one; its fields say what each means). */
export interface AttemptingWaiter extends Listener, AttemptLimit {
  readonly keys: LockKeys;
  readonly member: string;
  readonly token: string;
  readonly ttl: number;
  readonly strategy: WaitStrategyName;
  readonly stop: { readonly reason: unknown } | undefined;
  probe: boolean;
  heard: boolean;
  queuedRemotely: boolean;
  attempts: number;
  replied: boolean;
  refused: Error | undefined;
  refusals: number;
  timedOut: Error | undefined;
  wonLate: boolean;
}

/**
 * One attempt of `waiter`. With `notify` it queues in the backend only once a grant can be heard:
 * a release takes a queued waiter whose inbox has no listener for a dead one, and passes it over.
 *
 * A busy reply names the holding manager's tag: the timeout's message names that manager
 * (looked up once per manager, in the background, and only for a wait that can time out).
 *
 * An attempt that Redis refused for where its keys are (a Cluster slot that migrates: TRYAGAIN,
 * or the client's "Too many Cluster redirections") ran nothing: it counts as busy, to be tried
 * again after a short backoff, and the wait goes on until its deadline (which then ends it with
 * that refusal): a migration never ends a wait early with a BackendError.
 *
 * So does one that the client's own timeout ended ({@link isClientTimeout}), on a Cluster or one
 * Redis: its outcome is unknown, but the next attempt, with the same token, is the same request
 * again (acquire.lua is idempotent per token). The wait ends at latchkey's deadline, as without
 * the client's timeout (`Waiter.noReply`); the exit gives the token back (docs/safety.md,
 * "When the client's own timeout ends an attempt").
 */
export function sendAttempt(waiter: AttemptingWaiter, context: WaitContext, at?: number): Promise<Attempt> {
  const { backend, inbox, tuning } = context;
  const probe = waiter.probe;
  waiter.probe = false;
  const listening = !probe && waiter.strategy === 'notify' && inbox.listening(waiter.keys);
  // Queued already, it keeps its place while its inbox subscribes again (a failover or a
  // reshard moved the channel): its entry is written anew, which tells a release that passed it
  // over for want of a listener that its process lives.
  const queues = listening || (waiter.strategy === 'notify' && waiter.queuedRemotely);
  // Heard by the inbox from its first attempt that may queue (a grant or a wake-up can only
  // follow one) until the exit.
  if (!probe && !waiter.heard) {
    waiter.heard = true;
    inbox.add(waiter.member, waiter);
  }
  // Before the attempt is sent: a waiter that gives up while it is in flight must leave the queue.
  if (queues) waiter.queuedRemotely = true;
  const sentAt = at ?? now();
  waiter.attempts++;
  // A promise chain, not an async function: this is every lone caller's path.
  let sent: Promise<AcquireReply>;
  try {
    sent = attempt(backend, waiter.keys, waiter.token, waiter.ttl, queues ? { member: waiter.member, entryTtl: tuning.recheck * 3 } : undefined, waiter, sentAt);
  } catch (error) {
    sent = Promise.reject(error);
  }
  return sent.then(
    (reply): Attempt => {
      waiter.replied = true;
      waiter.refused = undefined;
      waiter.refusals = 0;
      return { reply, sentAt, inboxWasListening: listening };
    },
    (error: unknown): Attempt => {
      if (!(error instanceof Error) || waiter.stop) throw error;
      if (isSlotRefusal(error)) waiter.refused = error;
      else if (isClientTimeout(error)) waiter.timedOut = error;
      else throw error;
      waiter.refusals++;
      return { reply: { acquired: false, ttl: -1, retryAfter: refusalDelay(waiter.refusals, tuning) }, sentAt, inboxWasListening: listening, refused: true };
    },
  );
}

/**
 * Whether a lease with `left` ms of validity is worth returning as it is: more than half its
 * `ttl`. With less, a waiter that can refreshes it first (one more attempt, same token): a grant
 * read late (`Waiter.waitRemotely`), or a win answered late ({@link winOf}).
 */
export function enoughLeft(left: number, ttl: number): boolean {
  return left > ttl / 2;
}

/**
 * The attempt's win, if it is still of use. A win too late to be of use is refreshed by the next
 * attempt, or given back when the caller left. So is a win with less than half its TTL of
 * validity left while the wait has time for one more attempt (its reply was slow: a client's
 * retries through a Cluster migration), once: a lease handed out with a few ms left is lost
 * before its first renewal can be answered. The refresh's own win is taken whatever it has left.
 */
export function winOf(waiter: AttemptingWaiter, a: Attempt, context: WaitContext): Grant | undefined {
  const { reply, sentAt } = a;
  if (!reply.acquired) return undefined;
  const t = now();
  const left = waiter.stop ? 0 : validUntil(sentAt, waiter.ttl, context.driftFactor) - t;
  if (left > 0 && (enoughLeft(left, waiter.ttl) || waiter.wonLate || t >= waiter.deadline)) {
    return { fence: reply.fence, sentAt, replicated: reply.replicated };
  }
  if (waiter.stop) {
    // The caller left meanwhile: no attempt follows, so the lease goes back now.
    context.backend.release(waiter.keys, waiter.token).catch(() => {});
    return undefined;
  }
  // Too late to be of use (or too little left): the next attempt, with the same token, finds the
  // lease ours and refreshes it (a fresh validity). Not given back first: that release could run
  // after the next attempt (a client that re-sends it after a redirection or a NOSCRIPT, through
  // a migration) and free the lease that attempt returned. The exit gives it back if no attempt
  // wins after it.
  waiter.wonLate = true;
  return undefined;
}
