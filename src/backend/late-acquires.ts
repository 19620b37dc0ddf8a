/**
 * Acquires that timed out in the client and that the client may still send: their lock is given
 * back once more when they can no longer run.
 *
 * An acquire that failed with the client's own timeout ({@link isClientTimeout}) has an unknown
 * outcome, and on an ioredis Cluster it may even be sent again after it failed: the client still
 * retries a TRYAGAIN (a slot that migrates) from its delay queue, for up to about 1.6 s
 * ({@link ScriptClient.lateSends}). Run then, it takes a free lock with its token, or queues its
 * waiter again. A give-back sent when the waiter left, or when its lease was released, may run
 * before it and find nothing to free. So each give-back of such a token (a release, a leave) that
 * comes before the client's late sends are over is repeated once they are: a leave of its queue
 * entry, and a release, both of the token only (a no-op when the token holds nothing; never
 * another caller's lease). A waiter gives its token back only when it is done with it (it left, or
 * its lease was released), but for a win that came too late to be of use: it then tries again with
 * the same token, and that attempt's send calls the repeat off ({@link LateAcquires.sending}), so
 * a repeat never deletes a lease the waiter won after it.
 */
import { now } from '../clock.js';
import type { LockKeys } from '../keys.js';

/** A token whose acquire may still be sent, until when (monotonic ms), the queue entry it may make, and its repeated give-back once scheduled. */
interface Late {
  until: number;
  member: string | undefined;
  timer: NodeJS.Timeout | undefined;
}

/** What a repeated give-back sends: the backend's own leave and release. */
export interface GiveBack {
  leave(keys: LockKeys, member: string, token: string): Promise<unknown>;
  release(keys: LockKeys, token: string): Promise<unknown>;
}

export class LateAcquires {
  readonly #tokens = new Map<string, Late>();

  /** An acquire of `token` timed out in the client, which may send it for `window` ms more. */
  note(token: string, member: string | undefined, window: number): void {
    if (!(window > 0)) return;
    this.#sweep();
    const until = now() + window;
    const known = this.#tokens.get(token);
    if (known) {
      known.until = Math.max(known.until, until);
      known.member ??= member;
    } else {
      this.#tokens.set(token, { until, member, timer: undefined });
    }
  }

  /**
   * An acquire of `token` is being sent: its caller still uses the token (a waiter that gave back a
   * win too late to be of use tries again), so a repeated give-back scheduled for it is called off
   * until the next give-back. (Sent after this acquire, the repeat could delete the lease it wins.)
   */
  sending(token: string): void {
    if (this.#tokens.size === 0) return; // the common case (always, on one Redis): nothing to look up
    const late = this.#tokens.get(token);
    if (late?.timer === undefined) return;
    clearTimeout(late.timer);
    late.timer = undefined;
  }

  /**
   * A give-back of `token` was sent (a release, a leave): if an acquire of it may still be sent,
   * the give-back is repeated once that is over, unless an acquire of it is sent meanwhile.
   */
  gaveBack(keys: LockKeys, token: string, backend: GiveBack): void {
    if (this.#tokens.size === 0) return;
    const late = this.#tokens.get(token);
    if (!late) return;
    clearTimeout(late.timer);
    const wait = late.until - now();
    if (wait <= 0) {
      this.#tokens.delete(token);
      return;
    }
    late.timer = setTimeout(() => {
      if (this.#tokens.get(token) === late) this.#tokens.delete(token);
      // Back to back on the slot's connection: nothing of this token can be sent between them.
      if (late.member !== undefined) backend.leave(keys, late.member, token).catch(() => {});
      backend.release(keys, token).catch(() => {});
    }, wait);
    late.timer.unref();
  }

  /** How many repeated give-backs are scheduled (for tests). */
  get pending(): number {
    let count = 0;
    for (const late of this.#tokens.values()) if (late.timer !== undefined) count++;
    return count;
  }

  /** Drops the tokens whose late sends are over and that wait for no repeat. */
  #sweep(): void {
    const at = now();
    for (const [token, late] of this.#tokens) if (late.until <= at && late.timer === undefined) this.#tokens.delete(token);
  }
}
