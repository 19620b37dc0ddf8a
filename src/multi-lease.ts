import { inspect } from 'node:util';
import { InvalidOptionError, LeaseReleasedError, type LeaseLostError } from './errors.js';
import type { Lease } from './lease/lease.js';
import type { LeaseState } from './lease/lease-life.js';
import { checkTtl } from './validate.js';

const asyncDispose: typeof Symbol.asyncDispose = Symbol.asyncDispose ?? Symbol.for('Symbol.asyncDispose');

/**
 * Several locks held together, all or nothing: made by `acquireAll`, `tryAcquireAll` and
 * `withLocks`. Each key is held by a {@link Lease} of its own (its part), with its own fence;
 * the multi-lease is held while every part is, and is lost the moment any part is lost.
 *
 * Its {@link MultiLease.signal} aborts when any part is lost (reason: that part's
 * {@link LeaseLostError}) or when the whole is released (reason: a {@link LeaseReleasedError}).
 * {@link MultiLease.release} releases every part, even when one was lost, and then reports the loss.
 */
export class MultiLease implements AsyncDisposable {
  /** The lock names, in the fixed global order they were taken in (sorted by code unit). */
  readonly keys: readonly string[];
  /** One lease per key, in the order of {@link MultiLease.keys}. Release the whole, not a part. */
  readonly leases: readonly Lease[];
  /** The TTL the parts were acquired with, in ms; `extend()` uses it by default. */
  readonly ttl: number;
  readonly #byKey: ReadonlyMap<string, Lease>;
  #controller: AbortController | undefined;
  #releasing: Promise<void> | undefined;
  #released = false;

  /** @internal Made by the manager from parts it already holds. */
  constructor(leases: readonly Lease[], ttl: number) {
    this.leases = leases;
    this.keys = leases.map((lease) => lease.key);
    this.ttl = ttl;
    this.#byKey = new Map(leases.map((lease) => [lease.key, lease]));
  }

  /** The fencing token of `key`'s part: send it with writes to the resource that key protects. */
  fence(key: string): number {
    return this.lease(key).fence;
  }

  /** The part that holds `key`. */
  lease(key: string): Lease {
    const lease = this.#byKey.get(key);
    if (!lease) throw new InvalidOptionError('key', `one of the multi-lease's keys (${this.keys.join(', ')})`, key);
    return lease;
  }

  /**
   * Aborts when any part is lost (reason: its `LeaseLostError`) or when the whole is released
   * (reason: a `LeaseReleasedError` naming every key).
   */
  get signal(): AbortSignal {
    if (!this.#controller) {
      const controller = (this.#controller = new AbortController());
      // Once the whole has aborted its listeners on the parts go: a part joined from a reentrant
      // scope is the scope's lease, which outlives this multi-lease (and would gather one per call).
      const detach: Array<() => void> = [];
      controller.signal.addEventListener('abort', () => detach.forEach((d) => d()), { once: true });
      for (const lease of this.leases) {
        const part = lease.signal; // arms the part's expiry timer
        const onAbort = (): void => {
          // A part released by this multi-lease's own release: the whole aborts once all are done.
          if (this.#releasing && part.reason instanceof LeaseReleasedError) return;
          if (!controller.signal.aborted) controller.abort(part.reason);
        };
        if (part.aborted) onAbort();
        else {
          part.addEventListener('abort', onAbort, { once: true });
          detach.push(() => part.removeEventListener('abort', onAbort));
        }
      }
      if (this.#released && !controller.signal.aborted) controller.abort(this.#releasedReason());
    }
    return this.#controller.signal;
  }

  /** Until when every part is valid: the earliest part's validity (ms, monotonic clock). */
  get validUntil(): number {
    return Math.min(...this.leases.map((lease) => lease.validUntil));
  }

  /** Milliseconds of validity left on the part that expires first (0 once any part ended). */
  timeLeft(): number {
    return Math.min(...this.leases.map((lease) => lease.timeLeft()));
  }

  /** `held` while every part is held; `lost` once any part was lost; `released` after `release()`. */
  get state(): LeaseState {
    const states = this.leases.map((lease) => lease.state);
    if (states.includes('lost')) return 'lost';
    if (this.#released || states.includes('released')) return 'released';
    return 'held';
  }

  /** True while every part is held and valid. */
  get held(): boolean {
    return this.state === 'held';
  }

  /** The loss of the first part that was lost, if any. */
  get lostError(): LeaseLostError | undefined {
    return this.leases.find((lease) => lease.lostError !== undefined)?.lostError;
  }

  /** How long the whole has been held, in ms (since its last part was taken). */
  get heldFor(): number {
    return Math.min(...this.leases.map((lease) => lease.heldFor));
  }

  /**
   * Extends every part to `ttl` ms from now (default: the TTL they were acquired with), in
   * parallel. Rejects with the first part's error (a `LeaseLostError` when a part is gone) once
   * every extend has settled.
   */
  async extend(ttl: number = this.ttl): Promise<void> {
    checkTtl(ttl);
    await settleAll(this.leases.map((lease) => lease.extend(ttl)));
  }

  /**
   * Releases every part (in parallel). Resolves when all were held until now; calling it again
   * resolves too. When a part was lost (or the backend failed), the other parts are still
   * released, and then it rejects with that part's error.
   */
  release(): Promise<void> {
    this.#releasing ??= (async () => {
      try {
        await settleAll(this.leases.map((lease) => lease.release()));
        // Every part left to expire (Lease.letExpire): nothing was released, as a single lease's
        // release does nothing then; the whole stays held until its parts' TTLs run out.
        if (this.leases.every((lease) => lease.leftToExpire)) return;
      } catch (error) {
        this.#releasing = undefined; // a later call may try again (released parts resolve at once)
        // Some parts may be released now: the whole is not held any more either way.
        const controller = this.#controller;
        if (controller && !controller.signal.aborted) controller.abort(error);
        throw error;
      }
      this.#released = true;
      const controller = this.#controller;
      if (controller && !controller.signal.aborted) controller.abort(this.#releasedReason());
    })();
    return this.#releasing;
  }

  /** `await using all = await locks.acquireAll(...)` releases every part at the end of the block. */
  [asyncDispose](): Promise<void> {
    return this.release();
  }

  /** Leaves the tokens out of JSON. */
  toJSON(): Record<string, unknown> {
    return { keys: this.keys, fences: this.leases.map((lease) => lease.fence), ttl: this.ttl, state: this.state, timeLeft: Math.round(this.timeLeft()) };
  }

  [inspect.custom](): string {
    return `MultiLease ${inspect(this.toJSON())}`;
  }

  #releasedReason(): LeaseReleasedError {
    return new LeaseReleasedError(this.keys.join(', '));
  }
}

/** Waits for every promise; then rejects with the first rejection, if any. */
async function settleAll(promises: readonly Promise<unknown>[]): Promise<void> {
  const results = await Promise.allSettled(promises);
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
}
