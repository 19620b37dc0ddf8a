import { now } from '../clock.js';
import { LeaseLostError } from '../errors.js';

/** Options of the watchdog that keeps a lease alive while work runs. */
export interface RenewOptions {
  /**
   * Renew every this many ms. Default: a third of the lease's TTL. Must be below the lease's
   * validity (its TTL minus the clock-drift allowance, `ttl * driftFactor + 2` ms): a longer
   * interval could not renew before the lease expires and is refused (`INVALID_OPTION`).
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
  renew(): Promise<void>;
}

/**
 * Renews a lease before it expires, one renewal at a time, on `unref()`'d timers, so it never keeps
 * the process alive and never throws from a timer. A renewal that finds the lease gone reports
 * the loss; one that fails to reach the backend is retried while validity remains, and the lease's
 * own expiry reports it as unreachable when validity runs out.
 */
export class Watchdog {
  readonly #lease: Renewable;
  readonly #every: number;
  readonly #maxHold: number;
  readonly #onLost: (error: LeaseLostError) => void;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  /** The last error from a renewal that could not reach the backend; cleared by a success. */
  lastError: unknown;
  /** True while a renewal waits for its reply. */
  renewing = false;

  constructor(lease: Renewable, options: RenewOptions, onLost: (error: LeaseLostError) => void) {
    this.#lease = lease;
    this.#every = options.every ?? Math.max(1, Math.floor(lease.ttl / 3));
    this.#maxHold = options.maxHold ?? Infinity;
    this.#onLost = onLost;
    this.#schedule(this.#every);
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }

  #schedule(delay: number): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => void this.#tick(), delay);
    this.#timer.unref();
  }

  async #tick(): Promise<void> {
    if (this.#stopped) return;
    if (this.#lease.heldFor + this.#lease.ttl > this.#maxHold) {
      // Renewing again would carry the lease past maxHold: let it expire.
      this.stop();
      return;
    }
    if (now() >= this.#lease.validUntil) return; // never extend a lease whose validity has passed
    this.renewing = true;
    try {
      await this.#lease.renew();
      this.renewing = false;
      this.lastError = undefined;
      this.#schedule(this.#every);
    } catch (error) {
      this.renewing = false;
      if (error instanceof LeaseLostError) {
        this.stop();
        this.#onLost(error);
        return;
      }
      if (this.#stopped) return;
      // The backend could not be reached: try again soon, while validity remains.
      this.lastError = error;
      const left = this.#lease.validUntil - now();
      if (left > 0) this.#schedule(Math.max(1, Math.min(this.#every, Math.floor(left / 3))));
    }
  }
}
