import { now, validUntil } from '../clock.js';
import { Deadlines, type Deadline } from '../deadlines.js';

/**
 * The ends of every watched validity, on one timer: a timer per lease (a `Timeout` and its
 * closure, about 150 bytes each) weighed on a process that holds many leases. A validity extended
 * meanwhile is looked at again when the timer fires, and left watched.
 */
const watched = new Deadlines();

/** What a {@link Validity} tells when its timer finds the validity over. */
export interface ValidityOwner {
  /** The validity ran out (the timer saw it; an owner that ended meanwhile ignores it). */
  validityEnded(): void;
}

/**
 * How long a lease is valid, on the monotonic clock: from when its acquire, or the latest
 * extend that succeeded, was sent, plus its TTL, minus the clock-drift allowance. Its end is
 * watched (on the process's one timer for them) only once someone needs to hear of it the moment
 * it comes ({@link Validity.watch}); else it is noticed when the lease is next looked at
 * ({@link Validity.passed}).
 */
export class Validity implements Deadline {
  #until: number;
  /** When the acquire or the extend that `#until` counts from was sent. */
  #extendedAt: number;
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

  /** @internal Its end, for the timer of watched validities (see {@link Deadline}). */
  get at(): number {
    return this.#until;
  }

  /** @internal The timer found the validity over: its owner hears of it. */
  expire(): void {
    this.#watched = false;
    this.#owner.validityEnded();
  }

  /** True once the validity has run out (by `at`, the time now unless the caller just read it). */
  passed(at: number = now()): boolean {
    return at >= this.#until;
  }

  /** Arms the timer (once): the owner hears of the end the moment it comes. */
  watch(): void {
    if (this.#watched) return;
    this.#watched = true;
    watched.watch(this);
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
    const earlier = until < this.#until;
    this.#until = until;
    // A later end is found when the timer fires for the old one; an earlier one arms it sooner.
    if (earlier && this.#watched) watched.watch(this);
  }

  /** No longer watched: the lease ended. */
  stop(): void {
    if (!this.#watched) return;
    this.#watched = false;
    watched.delete(this);
  }
}
