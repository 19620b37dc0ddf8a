import { InvalidOptionError, LockSuppressedError } from '../errors.js';
import type { Lease } from '../lease/lease.js';
import type { MultiLease } from '../multi-lease.js';

/** A scoped call's options and callback: `(fn)` or `(options, fn)`; rejects a missing callback in the user's terms. */
export function splitCallback<A, F extends (...args: never[]) => unknown>(optionsOrFn: A | F, maybeFn: F | undefined, what: string): { options: Exclude<A, F> | undefined; fn: F } {
  const fn = typeof optionsOrFn === 'function' ? (optionsOrFn as F) : maybeFn;
  if (typeof fn !== 'function') throw new InvalidOptionError('fn', `a function to run while ${what}`, fn);
  return { options: typeof optionsOrFn === 'function' ? undefined : (optionsOrFn as Exclude<A, F>), fn };
}

/** Runs `fn(lease)`, then releases the lease: its loss is reported even when `fn` succeeded. */
export async function runHolding<L extends Lease | MultiLease, T>(lease: L, fn: (lease: L) => Promise<T> | T): Promise<T> {
  let result: T;
  try {
    result = await fn(lease);
  } catch (error) {
    try {
      await lease.release();
    } catch (releaseError) {
      throw new LockSuppressedError(releaseError, error);
    }
    throw error;
  }
  await lease.release();
  return result;
}
