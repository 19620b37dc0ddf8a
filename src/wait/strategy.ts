import { backoffDelay } from '../clock.js';
import { InvalidOptionError } from '../errors.js';

/**
 * How a waiter learns that it may try again.
 * - `notify` (default): the release script publishes on the lock's channel and the waiter retries
 *   when the message arrives, when the holder's remaining TTL runs out, or at the periodic safety
 *   re-check, whichever comes first — so a crashed holder (who never publishes) or a lost message
 *   never leaves a waiter asleep past the lock's expiry. (On one Redis the manager's queue keeper
 *   makes that re-check for all of its lock waiters at once: see queue-keeper.ts.)
 * - `backoff`: no pub/sub; retries after an exponential delay with full jitter, capped by the
 *   holder's remaining TTL.
 */
export type WaitStrategyName = 'notify' | 'backoff';

export interface WaitTuning {
  /** notify: the longest sleep between two attempts without a message, ms. Default 1000. */
  readonly recheck: number;
  /** backoff: first delay ceiling, ms. Default 5. */
  readonly backoffBase: number;
  /** backoff: largest delay ceiling, ms. Default 250. */
  readonly backoffCap: number;
}

export const DEFAULT_TUNING: WaitTuning = { recheck: 1000, backoffBase: 5, backoffCap: 250 };

export function checkStrategy(value: unknown, option = 'strategy'): WaitStrategyName {
  if (value !== 'notify' && value !== 'backoff') {
    throw new InvalidOptionError(option, '"notify" or "backoff"', value);
  }
  return value;
}

/**
 * How long to sleep after failed attempt number `attempt` (0-based), given the holder's remaining
 * TTL (`-1` when the key has no expiry). The holder's TTL bounds every sleep: past it the lock is
 * free even if nobody announced it.
 */
export function nextDelay(strategy: WaitStrategyName, attempt: number, holderTtl: number, tuning: WaitTuning): number {
  const untilExpiry = holderTtl >= 0 ? holderTtl + 1 : Infinity;
  const own = strategy === 'notify' ? tuning.recheck : backoffDelay(attempt, tuning.backoffBase, tuning.backoffCap);
  return Math.max(0, Math.min(own, untilExpiry));
}

/**
 * How long a waiter waits after its `refusals`-th refused attempt in a row (a Cluster slot that
 * migrates, see Waiter.attempt), ms: the backoff's ceiling doubled each time from `backoffBase`
 * (at least 25 ms) up to `backoffCap`, with jitter in its upper half, so that waiters of a slot do
 * not retry in step, nor hammer a node that answers TRYAGAIN at once (node-redis does not retry it).
 */
export function refusalDelay(refusals: number, tuning: WaitTuning, random: () => number = Math.random): number {
  const ceiling = Math.min(Math.max(tuning.backoffCap, 25), Math.max(25, tuning.backoffBase) * 2 ** Math.min(Math.max(0, refusals - 1), 30));
  return Math.ceil(ceiling / 2 + (random() * ceiling) / 2);
}
