/** How many locks found held lately a manager remembers, and for how long, ms. */
const HELD_LATELY_MAX = 1024;
const HELD_LATELY_MS = 10_000;

/**
 * The locks a manager found held or waited for lately (an attempt found them held, a release found
 * waiters), each until when (monotonic ms). A lone caller's first attempt at one of them queues in
 * the backend at once (see `Waiter.probe`), and its release is the full one: a contended lock costs
 * no extra round trip. Other locks get the cheapest calls. Bounded: the map is emptied when full,
 * which only costs a round trip on the next contended calls.
 *
 * The caller gives the time (`at`, monotonic ms): one it read already for the same call (when the
 * acquire started, when the attempt was sent, when the release began), not a clock read of its own
 * (a contended hand-off read the clock twelve times, each a call into Node's `performance`).
 */
export class HeldLately {
  readonly #until = new Map<string, number>();

  /** Remembers for {@link HELD_LATELY_MS} from `at` that `name` was found held or waited for. */
  mark(name: string, at: number): void {
    if (this.#until.size >= HELD_LATELY_MAX && !this.#until.has(name)) this.#until.clear();
    this.#until.set(name, at + HELD_LATELY_MS);
  }

  /** True when `name` was found held or waited for in the {@link HELD_LATELY_MS} ms before `at`. */
  has(name: string, at: number): boolean {
    if (this.#until.size === 0) return false;
    const until = this.#until.get(name);
    if (until === undefined) return false;
    if (until > at) return true;
    this.#until.delete(name);
    return false;
  }
}
