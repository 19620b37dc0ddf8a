/**
 * Time arithmetic, on the monotonic clock only. `performance.now()` never goes back when the
 * wall clock is set; no machine's wall clock is trusted for lease validity.
 */

/** Milliseconds on the process's monotonic clock. */
export const now = (): number => performance.now();

/** Fixed part of the clock-drift allowance, milliseconds (as in the Redlock algorithm). */
export const DRIFT_FLOOR = 2;

/** The drift allowance for a TTL: `ttl * driftFactor + 2` ms, rounded up. */
export function driftFor(ttl: number, driftFactor: number): number {
  return Math.ceil(ttl * driftFactor) + DRIFT_FLOOR;
}

/**
 * When a lease stops being valid, on the monotonic clock: counted from when the request was
 * *sent* (not when the reply came), minus the drift allowance, so a slow reply shortens the
 * lease instead of lengthening it.
 */
export function validUntil(sentAt: number, ttl: number, driftFactor: number): number {
  return sentAt + ttl - driftFor(ttl, driftFactor);
}

/** Full-jitter exponential backoff: a random delay in [0, min(cap, base * 2^attempt)]. */
export function backoffDelay(attempt: number, base: number, cap: number, random: () => number = Math.random): number {
  const ceiling = Math.min(cap, base * 2 ** Math.min(attempt, 30));
  return Math.floor(random() * (ceiling + 1));
}
