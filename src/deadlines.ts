import { LinkedSet } from './linked-set.js';

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
 * by themselves. The deadlines watched are a {@link LinkedSet}, not a `Set` (see there why).
 */
export class Deadlines {
  readonly #waiting = new LinkedSet<Deadline>();
  #timer: ReturnType<typeof setTimeout> | undefined;
  #timerAt = Infinity;

  /** Watches `deadline` (again: its `at` may have moved earlier). */
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
    // Timers fire on whole milliseconds: a deadline not yet passed when it fires is looked at again
    // 1 ms later. setTimeout fires at once for delays past 2^31 - 1 ms: a later one is looked at
    // then, and the timer armed again.
    this.#timer = setTimeout(() => this.#fire(), Math.min(2 ** 31 - 1, Math.max(1, Math.ceil(at - performance.now()))));
    this.#timer.unref();
  }

  #fire(): void {
    this.#timer = undefined;
    this.#timerAt = Infinity;
    const now = performance.now();
    const waiting = this.#waiting;
    let next = Infinity;
    let d = waiting.first();
    while (d) {
      let after = waiting.next(d);
      if (d.at <= now) {
        waiting.delete(d);
        d.expire(now);
        // Expiring may have ended others (a Redlock fan-out settled: its other nodes' deadlines
        // leave): if the next one left, look again from the first (what was looked at and is not
        // due is looked at again, what expired is gone).
        if (after && !waiting.has(after)) {
          after = waiting.first();
          next = Infinity;
        }
      } else if (d.at < next) {
        next = d.at;
      }
      d = after;
    }
    // A deadline watched while expiring others armed the timer already (first in the set, not looked at here).
    if (next < this.#timerAt) this.#arm(next);
  }
}

/** The deadlines of calls bounded by {@link settleBy}, on one timer. */
const bounded = new Deadlines();

/**
 * The last {@link Bounded} made, kept until the next: with none alive at a full GC, V8 would drop
 * its class's shapes and the optimized code that embeds them (see manager/last-made.ts). A
 * settled one holds only what sees a late value or error.
 */
const lastMade: { bounded: object | undefined } = { bounded: undefined };

/** What else a call bounded by {@link settleBy} does. */
export interface SettleOptions<T> {
  /** Sees a value that arrives after the call stopped being waited for (the deadline, or a stop). */
  readonly late?: (value: T) => void;
  /** Sees every rejection of the call, on time or late (`late`: after it stopped being waited for). */
  readonly failed?: (error: unknown, late: boolean) => void;
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
    lastMade.bounded = bounded;
    promise.then(
      (value) => bounded.value(value),
      (error: unknown) => bounded.error(error),
    );
  });
}

/**
 * One call bounded by {@link settleBy}: its entry on the shared timer, and how it settles. Once
 * settled it lets go of the caller's promise and the waiter that could stop it, keeping only what
 * sees a late value or error: whatever still points at it (a reply that comes late) keeps no
 * finished operation alive.
 */
class Bounded<T> implements Deadline {
  readonly at: number;
  #done = false;
  #expire: (() => Error) | undefined;
  readonly #late: ((value: T) => void) | undefined;
  readonly #failed: ((error: unknown, late: boolean) => void) | undefined;
  #stoppable: { cancel: ((reason: unknown) => void) | undefined } | undefined;
  #resolve: ((value: T) => void) | undefined;
  #reject: ((error: unknown) => void) | undefined;

  constructor(at: number, expire: () => Error, options: SettleOptions<T> | undefined, resolve: (value: T) => void, reject: (error: unknown) => void) {
    this.at = at;
    this.#expire = expire;
    this.#late = options?.late;
    this.#failed = options?.failed;
    this.#resolve = resolve;
    this.#reject = reject;
    if (at !== Infinity) bounded.watch(this);
    const stoppable = options?.stoppable;
    if (stoppable) {
      this.#stoppable = stoppable;
      stoppable.cancel = (reason) => {
        const reject = this.#reject;
        if (this.#end()) reject!(reason);
      };
    }
  }

  /** The deadline passed first. */
  expire(): void {
    const reject = this.#reject;
    const expire = this.#expire;
    if (this.#end()) reject!(expire!());
  }

  value(value: T): void {
    const resolve = this.#resolve;
    if (this.#end()) resolve!(value);
    else this.#late?.(value);
  }

  error(error: unknown): void {
    this.#failed?.(error, this.#done);
    const reject = this.#reject;
    if (this.#end()) reject!(error);
  }

  /** True the first time: the call is settled from here on (and lets go of what settled it). */
  #end(): boolean {
    if (this.#done) return false;
    this.#done = true;
    if (this.at !== Infinity) bounded.delete(this);
    this.#resolve = undefined;
    this.#reject = undefined;
    this.#expire = undefined;
    if (this.#stoppable) {
      this.#stoppable.cancel = undefined;
      this.#stoppable = undefined;
    }
    return true;
  }
}
