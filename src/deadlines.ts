/** What ends an operation that is still waiting at `at` (performance.now() ms): `expire`, called once. */
export interface Deadline {
  readonly at: number;
  expire(now: number): void;
}

/**
 * Deadlines of operations in flight, all on one timer: a Redlock fan-out's per-node timeout, a
 * waiter's attempt past its deadline. A timer per operation (setTimeout, unref, clearTimeout,
 * thousands of times a second) cost more than the rest of Redlock's bookkeeping and lengthened the
 * tail of its latency; nearly every operation ends long before its deadline, so the timer is armed
 * for the earliest one and, when it fires, expires what is due and is armed again for the
 * earliest left. The timer is unref'd: a guard on requests in flight, which hold the process open
 * by themselves.
 */
export class Deadlines {
  readonly #waiting = new Set<Deadline>();
  #timer: ReturnType<typeof setTimeout> | undefined;
  #timerAt = Infinity;

  watch(deadline: Deadline): void {
    this.#waiting.add(deadline);
    if (deadline.at < this.#timerAt) this.#arm(deadline.at);
  }

  delete(deadline: Deadline): void {
    this.#waiting.delete(deadline);
  }

  #arm(at: number): void {
    clearTimeout(this.#timer);
    this.#timerAt = at;
    // Timers fire on whole milliseconds: a deadline not yet passed when it fires is looked at again 1 ms later.
    this.#timer = setTimeout(() => this.#fire(), Math.max(1, Math.ceil(at - performance.now())));
    this.#timer.unref();
  }

  #fire(): void {
    this.#timer = undefined;
    this.#timerAt = Infinity;
    const now = performance.now();
    let next = Infinity;
    for (const deadline of this.#waiting) {
      if (deadline.at <= now) {
        this.#waiting.delete(deadline);
        deadline.expire(now);
      } else if (deadline.at < next) {
        next = deadline.at;
      }
    }
    if (next < Infinity) this.#arm(next);
  }
}

/** The deadlines of calls bounded by {@link settleBy}, on one timer. */
const bounded = new Deadlines();

/** What else a call bounded by {@link settleBy} does. */
export interface SettleOptions<T> {
  /** Sees a value that arrives after the call stopped being waited for (the deadline, or a stop). */
  readonly late?: (value: T) => void;
  /** Sees every rejection of the call, on time or late. */
  readonly failed?: (error: unknown) => void;
  /** Given a `cancel` that ends the wait at once with its reason while it waits; undefined after. */
  readonly stoppable?: { cancel: ((reason: unknown) => void) | undefined };
}

/**
 * Settles as `promise` does, unless the monotonic time `at` (performance.now() ms; Infinity: no
 * deadline) comes first, or a stop: it then rejects with `expire()` (or the stop's reason), and
 * `late` sees a value that arrives after that. For calls to a Redis that may not answer: latchkey
 * stops waiting on its own clock, whatever the client's retry settings, and still learns what a
 * late reply did. One promise, one {@link Bounded} (which is the entry on the shared timer) and
 * its two reply handlers: every acquire attempt and release pays for no more.
 */
export function settleBy<T>(promise: Promise<T>, at: number, expire: () => Error, options?: SettleOptions<T>): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const bounded = new Bounded(at, expire, options, resolve, reject);
    promise.then(
      (value) => bounded.value(value),
      (error: unknown) => bounded.error(error),
    );
  });
}

/** One call bounded by {@link settleBy}: its entry on the shared timer, and how it settles. */
class Bounded<T> implements Deadline {
  readonly at: number;
  #done = false;
  readonly #expire: () => Error;
  readonly #options: SettleOptions<T> | undefined;
  readonly #resolve: (value: T) => void;
  readonly #reject: (error: unknown) => void;

  constructor(at: number, expire: () => Error, options: SettleOptions<T> | undefined, resolve: (value: T) => void, reject: (error: unknown) => void) {
    this.at = at;
    this.#expire = expire;
    this.#options = options;
    this.#resolve = resolve;
    this.#reject = reject;
    if (at !== Infinity) bounded.watch(this);
    const stoppable = options?.stoppable;
    if (stoppable) stoppable.cancel = (reason) => this.#end() && reject(reason);
  }

  /** The deadline passed first. */
  expire(): void {
    if (this.#end()) this.#reject(this.#expire());
  }

  value(value: T): void {
    if (this.#end()) this.#resolve(value);
    else this.#options?.late?.(value);
  }

  error(error: unknown): void {
    this.#options?.failed?.(error);
    if (this.#end()) this.#reject(error);
  }

  /** True the first time: the call is settled from here on. */
  #end(): boolean {
    if (this.#done) return false;
    this.#done = true;
    if (this.at !== Infinity) bounded.delete(this);
    const stoppable = this.#options?.stoppable;
    if (stoppable) stoppable.cancel = undefined;
    return true;
  }
}
