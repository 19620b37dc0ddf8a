import { InvalidOptionError, LeaseLostError, LockSuppressedError } from '../errors.js';
import type { Lease } from '../lease/lease.js';
import type { MultiLease } from '../multi-lease.js';
import { checkOptionsObject } from '../validate.js';

/** A scoped call's options and callback: `(fn)` or `(options, fn)`; rejects a missing callback in the user's terms. */
export function splitCallback<A, F extends (...args: never[]) => unknown>(optionsOrFn: A | F, maybeFn: F | undefined, what: string): { options: Exclude<A, F> | undefined; fn: F } {
  const fn = typeof optionsOrFn === 'function' ? (optionsOrFn as F) : maybeFn;
  if (typeof fn !== 'function') throw new InvalidOptionError('fn', `a function to run while ${what}`, fn);
  if (typeof optionsOrFn === 'function') return { options: undefined, fn };
  if (optionsOrFn !== undefined) checkOptionsObject(optionsOrFn, 'options');
  return { options: optionsOrFn as Exclude<A, F>, fn };
}

/** Refuses a callback given where the lock's name goes (`withLock(async () => …)`), before the missing callback is blamed. */
export function refuseCallbackFirst(first: unknown, option: string, call: string, what: string): void {
  if (typeof first === 'function') {
    throw new InvalidOptionError(option, `${what} first: ${call} takes it first and the function after it`, first, 'a function in its place');
  }
}

/**
 * Runs `fn(lease)`, then releases the lease: its loss is reported even when `fn` succeeded. When
 * `fn` threw and the release failed too, both are reported (LockSuppressedError), unless `fn`
 * threw the very loss the release reports (a nested scope's rejection, the signal's reason): then
 * that loss, as it is.
 */
export async function runHolding<L extends Lease | MultiLease, T>(lease: L, fn: (lease: L) => Promise<T> | T): Promise<T> {
  let result: T;
  try {
    result = await fn(lease);
  } catch (error) {
    try {
      await lease.release();
    } catch (releaseError) {
      if (sameLoss(error, releaseError)) throw releaseError;
      throw new LockSuppressedError(releaseError, error);
    }
    throw error;
  }
  await lease.release();
  return result;
}

/** Whether two errors are one loss: the same error, or the loss of the same lease (its key and fence). */
function sameLoss(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  return a instanceof LeaseLostError && b instanceof LeaseLostError && a.key === b.key && a.fence === b.fence;
}
