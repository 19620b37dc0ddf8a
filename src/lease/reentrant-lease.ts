import type { LockKeys } from '../keys.js';
import { LeaseReleasedError, type LeaseLostError } from '../errors.js';
import { Lease, type LeaseContext } from './lease.js';
import type { LeaseState } from './lease-life.js';

/**
 * A reentrant hold on `lease` (or on the lease a reentrant handle joined): a handle that shares
 * its key, token, fence, TTL, validity and signal, and whose release only gives its own hold back.
 */
export function enterLease(lease: Lease): Lease {
  const outer = lease instanceof ReentrantLease ? lease.outer : lease;
  const hold = outer.addHold();
  return new ReentrantLease(outer, hold.leave, hold.context, hold.keys, outer.token, hold.sentAt, outer.replicated);
}

/**
 * A reentrant hold: what a nested `acquire`, `tryAcquire` or `withLock` of a key returns inside a
 * `withLock` scope that holds it (manager option `reentrant`). It is the same lock as the scope's
 * lease (key, token, fence, TTL, validity, signal, `extend` are the outer lease's); its `release()`
 * only gives this hold back and never talks to the backend. The lock itself is released when the
 * outermost scope ends.
 */
class ReentrantLease extends Lease {
  readonly #outer: Lease;
  readonly #leave: () => void;
  #released = false;

  constructor(
    outer: Lease,
    leave: () => void,
    context: LeaseContext,
    keys: LockKeys,
    token: string,
    sentAt: number,
    replicated: boolean | undefined,
  ) {
    super(context, keys, token, outer.fence, outer.ttl, sentAt, undefined, replicated);
    this.#outer = outer;
    this.#leave = leave;
  }

  override get token(): string {
    return this.#outer.token;
  }

  /** The outer lease's signal: it aborts when the lock itself ends (the outermost release, or a loss), not when this hold is released. */
  override get signal(): AbortSignal {
    return this.#outer.signal;
  }

  override get validUntil(): number {
    return this.#outer.validUntil;
  }

  override timeLeft(): number {
    return this.#released ? 0 : this.#outer.timeLeft();
  }

  /** `released` once this hold was released (the lock may still be held by the outer scope), else the outer lease's state. */
  override get state(): LeaseState {
    const outer = this.#outer.state;
    return this.#released && outer === 'held' ? 'released' : outer;
  }

  override get held(): boolean {
    return this.state === 'held';
  }

  override get holds(): number {
    return this.#outer.holds;
  }

  override get heldFor(): number {
    return this.#outer.heldFor;
  }

  override get lostError(): LeaseLostError | undefined {
    return this.#outer.lostError;
  }

  /** Extends the lock (the outer lease) while this hold is in force. */
  override extend(ttl: number = this.ttl): Promise<void> {
    if (this.#released && this.#outer.state === 'held') return Promise.reject(new LeaseReleasedError(this.key));
    return this.#outer.extend(ttl);
  }

  /**
   * Gives this hold back (once; later calls change nothing). Resolves, or rejects with the
   * outer lease's {@link LeaseLostError} when the lock was lost: every level sees the loss.
   */
  override release(): Promise<void> {
    this.#leave();
    this.#released = true;
    return this.#outer.state === 'lost' ? Promise.reject(this.#outer.lostError) : Promise.resolve();
  }

  /** Leaves the lease this handle joined to expire (see {@link Lease.letExpire}). */
  override letExpire(): void {
    this.#outer.letExpire();
  }

  override get leftToExpire(): boolean {
    return this.#outer.leftToExpire;
  }

  /** The lease this handle joined. */
  get outer(): Lease {
    return this.#outer;
  }

  override watchExpiry(): void {
    this.#outer.watchExpiry();
  }

  override toJSON(): Record<string, unknown> {
    return { ...this.#outer.toJSON(), state: this.state, timeLeft: Math.round(this.timeLeft()), holds: this.holds, reentrant: true };
  }
}
