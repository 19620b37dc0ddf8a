import { now } from '../clock.js';
import type { LeaseLostError } from '../errors.js';
import { Validity } from './validity.js';

/** The state of a lease: held, ended by `release()`, or lost (expired, taken, deleted, unreachable). */
export type LeaseState = 'held' | 'released' | 'lost';

/**
 * The life of a lease, from held to its one end: released, or lost. It keeps the validity (until
 * when the lease counts as held, on the monotonic clock), notices when that runs out, and aborts
 * the lease's signal at the end. {@link Lease} adds what talks to the backend: extend, release,
 * the watchdog's renewals.
 */
export abstract class LeaseLife {
  readonly #validity: Validity;
  #state: LeaseState = 'held';
  #lostError: LeaseLostError | undefined;
  /** Made on first use of `signal`: most leases are never asked for one. */
  #controller: AbortController | undefined;
  /** Why the lease ended, made when first needed (an Error captures a stack: not on the hot path). */
  #endReason: (() => Error) | undefined;

  /** @internal Valid for `ttl` ms from `sentAt`, less the clock-drift allowance of `driftFactor`. */
  protected constructor(sentAt: number, ttl: number, driftFactor: number) {
    this.#validity = new Validity(this, sentAt, ttl, driftFactor);
  }

  /** Aborts when the lease is released (reason: {@link LeaseReleasedError}) or lost (reason: {@link LeaseLostError}). */
  get signal(): AbortSignal {
    if (!this.#controller) {
      this.#controller = new AbortController();
      if (this.#endReason) this.#controller.abort(this.#endReason());
      else this.watchExpiry();
    }
    return this.#controller.signal;
  }

  /**
   * Until when the lease is valid, in ms on the monotonic clock (`performance.now()`): the time the
   * acquire (or last extend) was sent, plus the TTL, minus the clock-drift allowance.
   */
  get validUntil(): number {
    return this.#validity.until;
  }

  /** Milliseconds of validity left (0 once expired). */
  timeLeft(): number {
    return this.#state === 'held' ? Math.max(0, this.#validity.until - now()) : 0;
  }

  get state(): LeaseState {
    this.noticeExpiry();
    return this.#state;
  }

  /** True while the lease is held and valid. */
  get held(): boolean {
    this.noticeExpiry();
    return this.#state === 'held';
  }

  /** Whether the lease was lost, and why. */
  get lostError(): LeaseLostError | undefined {
    return this.#lostError;
  }

  /** @internal Arms the expiry timer, so the lease ends (and its signal aborts) the moment its validity runs out. */
  watchExpiry(): void {
    this.noticeExpiry();
    if (this.#state === 'held') this.#validity.watch();
  }

  /** @internal Its validity's timer found the validity over (see {@link Validity}). */
  validityEnded(): void {
    if (this.#state === 'held') this.expire();
  }

  /** @internal The state as it stands, without noticing an expiry (`toJSON` reports, it does not end). */
  protected get stateNow(): LeaseState {
    return this.#state;
  }

  /** @internal The validity runs from `sentAt` for `ttl` ms (an extend or a renewal that succeeded). */
  protected extended(sentAt: number, ttl: number): void {
    this.#validity.extended(sentAt, ttl);
  }

  /** @internal Ends the lease as lost when its validity ran out (by `at`, the time now unless the caller just read it). */
  protected noticeExpiry(at?: number): void {
    if (this.#state === 'held' && this.#validity.passed(at)) this.expire();
  }

  /** @internal Throws why the lease ended, if it did. */
  protected assertHeld(): void {
    this.noticeExpiry();
    if (this.#state === 'lost') throw this.#lostError;
    if (this.#state === 'released') throw this.#endReason!();
  }

  /** @internal Ends a held lease as lost, with `error`; nothing once it ended. */
  protected lose(error: LeaseLostError): void {
    if (this.#state !== 'held') return;
    this.#lostError = error;
    this.end('lost', () => error);
  }

  /** @internal Ends the lease (once): its validity is no longer watched, `ended` runs, then its signal aborts with `reason()`. */
  protected end(state: Exclude<LeaseState, 'held'>, reason: () => Error): void {
    this.#state = state;
    this.#endReason = reason;
    this.#validity.stop();
    this.ended();
    this.#controller?.abort(reason());
  }

  /** @internal The validity ran out while held: the lease ends as lost, and says why. */
  protected abstract expire(): void;

  /** @internal The lease just ended: what else stops with it (before its signal aborts). */
  protected abstract ended(): void;
}
