/** Why a lease is lost, as the errors a lease reports (see `Lease`). */
import type { Backend } from '../backend/backend.js';
import { now } from '../clock.js';
import { settleBy } from '../deadlines.js';
import { LeaseLostError, UnreachableError, type LeaseLostReason } from '../errors.js';
import type { LockKeys } from '../keys.js';

/** How long the release of a lease already known lost waits for the give-back of its key, and a loss for the lookup of a forced release's note, ms (a live Redis answers in far less). */
export const GIVE_BACK_WAIT = 250;

/** The loss of the lease with `fence` on lock `key`, for `reason`. */
export function lossOf(key: string, fence: number, reason: LeaseLostReason, cause?: unknown): LeaseLostError {
  return new LeaseLostError(key, fence, reason, cause === undefined ? undefined : { cause });
}

/** Why the lease on `key` is lost when Redis did not answer its `operation`: the server, and the last error seen (`error`, else the client's connection error). */
export function unreachableFor(backend: Backend, key: string, operation: string, heldSince: number, error?: unknown): UnreachableError {
  const what = `the ${operation} of lease on "${key}"`;
  return new UnreachableError(operation, what, backend.server, now() - heldSince, error ?? backend.lastError?.());
}

/**
 * The reason of a loss the backend found (`gone`, `taken`): `forced` when an operator's forced
 * release left a note for this token (one Redis: see Backend.markForced), looked up for
 * {@link GIVE_BACK_WAIT} ms at most: a loss is never held up by it.
 */
export async function reasonOfLoss(backend: Backend, keys: LockKeys, token: string, reply: 'gone' | 'taken'): Promise<LeaseLostReason> {
  const look = backend.wasForced?.(keys, token);
  const forced = look ? await settleBy(look, now() + GIVE_BACK_WAIT, () => new Error('no reply')).catch(() => false) : false;
  return forced ? 'forced' : reply;
}
