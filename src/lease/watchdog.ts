import type { ExtendItem, OwnershipReply } from '../backend/backend.js';
import { now } from '../clock.js';
import { LeaseLostError } from '../errors.js';
import type { LockKeys } from '../keys.js';
import type { Queued } from './renewal-queue.js';
import type { Renewals } from './renewals.js';

/** Options of the watchdog that keeps a lease alive while work runs. */
export interface RenewOptions {
  /**
   * Renew every this many ms. Default: a third of the lease's TTL. Must be below the lease's
   * validity (its TTL minus the clock-drift allowance, `ttl * driftFactor + 2` ms): a longer
   * interval could not renew before the lease expires and is refused (`INVALID_OPTION`).
   * Renewals of a manager's leases are batched: a lease may be renewed up to a quarter of this
   * interval early, together with others, never later.
   */
  readonly every?: number;
  /** Stop renewing once the lease has been held this long (ms); it then expires by its TTL. Default: no cap. */
  readonly maxHold?: number;
}

/** The narrow view of a lease the watchdog needs. */
export interface Renewable {
  readonly ttl: number;
  readonly validUntil: number;
  readonly heldFor: number;
  readonly token: string;
  /** One renewal alone (`Backend.extend`), reported to the manager's observer. */
  renew(): Promise<void>;
  /**
   * A batched renewal's outcome for this lease, sent at `sentAt`: the backend's reply, or the
   * error of a batch that did not reach it. Undefined when nothing more is to be done (extended,
   * applied at once; or the lease was released meanwhile: the release wins); else a promise that
   * rejects as `renew()` would. `late`: the renewal was already settled (its validity ran out
   * before the reply): only what the reply did is handled. `at`: the time now, when the caller
   * has just read it (a batch reads the clock once for all its leases).
   */
  renewed(sentAt: number, reply: OwnershipReply | Error, late?: boolean, at?: number): Promise<void> | undefined;
}

/**
 * Keeps a lease alive while work runs: when each renewal is due, and what its outcome means. It
 * owns no timer: the manager's {@link Renewals} renews the due leases of the whole manager on one
 * `unref()`'d timer, many in one call where the backend can (`Backend.extendMany`), and never
 * throws from a timer. A renewal that finds the lease gone reports the loss; one that fails to
 * reach the backend is retried while validity remains, and the lease's own expiry reports it as
 * unreachable when validity runs out.
 */
export class Watchdog implements ExtendItem, Queued {
  readonly lease: Renewable;
  /** The lease's lock, for a batched renewal. */
  readonly keys: LockKeys;
  /** Renew every this many ms. */
  readonly every: number;
  readonly #maxHold: number;
  readonly #renewals: Renewals;
  /** When the next renewal is due, monotonic ms (meaningful while scheduled). */
  due = Infinity;
  /** @internal Where the scheduler's queue keeps this watchdog (see RenewalQueue); -1 while not scheduled. */
  slot = -1;
  /** @internal The scheduler's queue's count of this watchdog's entries (see RenewalQueue). */
  seq = 0;
  #stopped = false;
  /** The last error from a renewal that could not reach the backend; cleared by a success. */
  lastError: unknown;
  /** True while a renewal waits for its reply. */
  renewing = false;

  constructor(lease: Renewable, keys: LockKeys, options: RenewOptions, renewals: Renewals) {
    this.lease = lease;
    this.keys = keys;
    this.every = options.every ?? Math.max(1, Math.floor(lease.ttl / 3));
    this.#maxHold = options.maxHold ?? Infinity;
    this.#renewals = renewals;
    // A lease won late (its winning attempt long in flight: a client's retries through a Cluster
    // migration) may have less validity left than two intervals: its first renewal then comes
    // at half of what is left, not a whole interval on, after its validity ran out.
    const left = lease.validUntil - now();
    this.#schedule(left < 2 * this.every ? Math.max(1, Math.floor(left / 2)) : this.every);
  }

  /** The lease's token (an {@link ExtendItem}: a batch sends the watchdogs themselves, no object made per renewal). */
  get token(): string {
    return this.lease.token;
  }

  /** The TTL each renewal sets: the lease's own. */
  get ttl(): number {
    return this.lease.ttl;
  }

  stop(): void {
    this.#stopped = true;
    this.#renewals.remove(this);
  }

  /**
   * Called by the scheduler when the renewal is due (or nearly: see Renewals): true when it is to
   * be sent now, false when the lease is not to be renewed again (maxHold reached: it expires by
   * its TTL; or its validity has passed: never extend such a lease).
   */
  begin(at: number): boolean {
    if (this.#stopped) return false;
    if (this.lease.heldFor + this.lease.ttl > this.#maxHold) {
      // Renewing again would carry the lease past maxHold: let it expire.
      this.stop();
      return false;
    }
    if (at >= this.lease.validUntil) return false;
    this.renewing = true;
    return true;
  }

  /** Renews the lease alone (a backend that does not batch, a semaphore's permit). */
  renewAlone(): void {
    this.lease.renew().then(
      () => this.#renewed(),
      (error: unknown) => this.#failed(error),
    );
  }

  /** A batch's outcome for this lease, come at `at` (see {@link Renewable.renewed}). */
  replied(sentAt: number, reply: OwnershipReply | Error, at: number = now()): void {
    const outcome = this.lease.renewed(sentAt, reply, false, at);
    if (!outcome) this.#renewed(at);
    else
      outcome.then(
        () => this.#renewed(),
        (error: unknown) => this.#failed(error),
      );
  }

  #schedule(delay: number, at: number = now()): void {
    if (this.#stopped) return;
    this.due = at + delay;
    this.#renewals.add(this, delay === this.every);
  }

  #renewed(at?: number): void {
    this.renewing = false;
    this.lastError = undefined;
    this.#schedule(this.every, at);
  }

  #failed(error: unknown): void {
    this.renewing = false;
    // A renewal rejects with a LeaseLostError only once the lease is lost: nothing more to do.
    if (error instanceof LeaseLostError) {
      this.stop();
      return;
    }
    if (this.#stopped) return;
    // The backend could not be reached: try again soon, while validity remains.
    this.lastError = error;
    const left = this.lease.validUntil - now();
    if (left > 0) this.#schedule(Math.max(1, Math.min(this.every, Math.floor(left / 3))));
  }
}
