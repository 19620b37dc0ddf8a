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

/**
 * Settles as `promise` does, unless the monotonic time `at` (performance.now() ms) comes first:
 * it then rejects with `expire()`, and `late` sees a value that arrives after that. For calls to a
 * Redis that may not answer: latchkey stops waiting on its own clock, whatever the client's retry
 * settings, and still learns what a late reply did.
 */
export function settleBy<T>(promise: Promise<T>, at: number, expire: () => Error, late?: (value: T) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let done = false;
    const deadline: Deadline = {
      at,
      expire: () => {
        if (done) return;
        done = true;
        reject(expire());
      },
    };
    bounded.watch(deadline);
    promise.then(
      (value) => {
        if (done) return late?.(value);
        done = true;
        bounded.delete(deadline);
        resolve(value);
      },
      (error: unknown) => {
        if (done) return;
        done = true;
        bounded.delete(deadline);
        reject(error);
      },
    );
  });
}
