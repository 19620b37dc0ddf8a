import { now, validUntil } from '../clock.js';

/** What a {@link Validity} tells when its timer finds the validity over. */
export interface ValidityOwner {
  /** The validity ran out (the timer saw it; an owner that ended meanwhile ignores it). */
  validityEnded(): void;
}

/**
 * How long a lease is valid, on the monotonic clock: from when its acquire, or the latest
 * extend that succeeded, was sent, plus its TTL, minus the clock-drift allowance. A timer is armed
 * only once someone needs to hear of the end the moment it comes ({@link Validity.watch}); else
 * the end is noticed when the lease is next looked at ({@link Validity.passed}).
 */
export class Validity {
  #until: number;
  /** When the acquire or the extend that `#until` counts from was sent. */
  #extendedAt: number;
  #timer: NodeJS.Timeout | undefined = undefined;
  #watched = false;
  readonly #driftFactor: number;
  readonly #owner: ValidityOwner;

  constructor(owner: ValidityOwner, sentAt: number, ttl: number, driftFactor: number) {
    this.#owner = owner;
    this.#driftFactor = driftFactor;
    this.#extendedAt = sentAt;
    this.#until = validUntil(sentAt, ttl, driftFactor);
  }

  /** Until when the lease is valid, ms on the monotonic clock (`performance.now()`). */
  get until(): number {
    return this.#until;
  }

  /** True once the validity has run out. */
  passed(): boolean {
    return now() >= this.#until;
  }

  /** Arms the timer (once): the owner hears of the end the moment it comes. */
  watch(): void {
    if (this.#watched) return;
    this.#watched = true;
    this.#arm();
  }

  /**
   * Extended by a call sent at `sentAt` for `ttl` ms. Validity counts from the latest call sent
   * (a renewal batch and an `extend()` may be in flight together; one connection runs them in the
   * order sent, so the latest sent set the key's TTL last).
   */
  extended(sentAt: number, ttl: number): void {
    if (sentAt < this.#extendedAt) return;
    this.#extendedAt = sentAt;
    const until = validUntil(sentAt, ttl, this.#driftFactor);
    const later = until >= this.#until;
    this.#until = until;
    // A later validity leaves an armed timer as it is: it fires at the old one, finds the lease
    // valid, and arms itself again (a timer per validity, not one per renewal).
    if (!later || this.#timer === undefined) this.#arm();
  }

  /** Clears the timer: the lease ended. */
  stop(): void {
    this.#watched = false;
    clearTimeout(this.#timer);
  }

  #arm(): void {
    if (!this.#watched) return;
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      if (!this.#watched) return;
      if (this.passed()) this.#owner.validityEnded();
      else this.#arm();
    }, Math.max(0, Math.ceil(this.#until - now())));
    this.#timer.unref();
  }
}
