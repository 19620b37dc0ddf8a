import { inspect } from 'node:util';
import type { OwnershipReply } from '../backend/backend.js';
import { now } from '../clock.js';
import { settleBy } from '../deadlines.js';
import { LeaseReleasedError } from '../errors.js';
import type { LockKeys } from '../keys.js';
import { checkTtl } from '../validate.js';
import type { Hold as HoldOf, LeaseContext as LeaseContextOf } from './lease-context.js';
import { GIVE_BACK_WAIT, lossOf, reasonOfLoss, unreachableFor } from './lease-loss.js';
import { LeaseLife } from './lease-life.js';
import { Watchdog, type RenewOptions } from './watchdog.js';

/** What a lease needs from the manager that made it. */
export type LeaseContext = LeaseContextOf<Lease>;
/** @internal What a reentrant handle shares with the lease it joined (see {@link Lease.addHold}). */
export type Hold = HoldOf<Lease>;

const asyncDispose: typeof Symbol.asyncDispose = Symbol.asyncDispose ?? Symbol.for('Symbol.asyncDispose');

/**
 * A held lock. Created by `acquire`, `tryAcquire` and `withLock`; ended by {@link Lease.release}
 * (or `await using`). Its {@link Lease.signal} aborts the moment the lease stops being held, with a
 * {@link LeaseLostError} or a {@link LeaseReleasedError} as the reason: pass it to the work the
 * lock protects so that work stops when the lock is gone.
 */
export class Lease extends LeaseLife implements AsyncDisposable {
  /** The lock's name, as given to `acquire`. */
  readonly key: string;
  /**
   * The fencing token: strictly greater than every earlier lease's on this lock. Send it with every
   * write to the protected resource, which must refuse a fence lower than the highest it has seen.
   *
   * A large number: microseconds since the epoch (the server's clock), e.g. `1795614530460300`,
   * past a 32-bit `int`. Store it in a 64-bit column (SQL `BIGINT`, PostgreSQL `int8`), e.g.
   * `fence BIGINT NOT NULL DEFAULT 0`; it is an exact JavaScript `number` (below 2^53 until 2255).
   */
  readonly fence: number;
  /** The TTL this lease was acquired with, in ms; `extend()` uses it by default. */
  readonly ttl: number;
  /**
   * With the manager's `replication` option: whether the asked number of replicas acknowledged
   * the acquire (false only with `shortfall: 'accept'`). `undefined` without the option.
   */
  readonly replicated: boolean | undefined;
  readonly #token: string;
  readonly #keys: LockKeys;
  readonly #context: LeaseContext;
  readonly #acquiredAt: number;
  #watchdog: Watchdog | undefined;
  /** Extends run one at a time, in order. */
  #queue: Promise<unknown> | undefined = undefined;
  #releasing: Promise<void> | undefined;
  /** Holds in force: this lease's own, plus one per reentrant handle not yet released. */
  #holds = 1;
  /** True once {@link Lease.letExpire} was called: released by nobody, it ends at its TTL. */
  #leftToExpire = false;

  /** @internal Made by the manager; not for direct use. */
  constructor(
    context: LeaseContext,
    keys: LockKeys,
    token: string,
    fence: number,
    ttl: number,
    sentAt: number,
    renew: RenewOptions | undefined,
    replicated?: boolean,
  ) {
    super(sentAt, ttl, context.driftFactor);
    this.replicated = replicated;
    this.#context = context;
    this.#keys = keys;
    this.key = keys.name;
    this.#token = token;
    this.fence = fence;
    this.ttl = ttl;
    this.#acquiredAt = sentAt;
    // The manager arms the expiry (watchExpiry) once it has registered the lease: a lease that
    // ended inside its constructor would end before the manager knew it.
    if (renew) this.#watchdog = new Watchdog(this, keys, renew, context.renewals);
  }

  /** The random token that proves ownership in the backend (128 bits). Never log it. */
  get token(): string {
    return this.#token;
  }

  /**
   * How many holds of this lock are in force: 1 for a lease held by one caller, plus one for each
   * reentrant `acquire`, `tryAcquire` or `withLock` of the same key inside its `withLock` scope
   * (manager option `reentrant`) not yet released; 0 once the lease has ended (released or lost).
   * A reentrant handle reports the count of the lease it joined.
   */
  get holds(): number {
    return this.state === 'held' ? this.#holds : 0;
  }

  /**
   * @internal One more hold on this lease, for a reentrant handle ({@link enterLease}): what the
   * handle shares, and the function that gives the hold back (once).
   */
  addHold(): Hold {
    this.#holds++;
    let left = false;
    const leave = (): void => {
      if (left) return;
      left = true;
      this.#holds--;
    };
    return { leave, context: this.#context, keys: this.#keys, sentAt: this.#acquiredAt };
  }

  /** How long the lease has been held so far, in ms. */
  get heldFor(): number {
    return now() - this.#acquiredAt;
  }

  /**
   * Sets the lease's time to live to `ttl` ms from now (default: the TTL it was acquired with).
   * Rejects with {@link LeaseLostError} when the lease is no longer held (it expired, was deleted
   * or was taken): extend never recreates a lock that is gone.
   */
  extend(ttl: number = this.ttl): Promise<void> {
    checkTtl(ttl);
    return this.#serial(async () => {
      this.assertHeld();
      const sentAt = now();
      this.#context.touchHolder?.();
      // Not waited for past the lease's validity (a Redis that does not answer): the lease is
      // lost then, and an extend that succeeds later is given back.
      const reply = await this.#withinValidity(this.#context.backend.extend(this.#keys, this.#token, ttl), 'extend', (late) => {
        if (late === 'ok') void this.#giveBack();
      });
      if (reply !== 'ok') await this.#lostBy(reply);
      this.noticeExpiry();
      // Extended in the backend, but the lease counts as lost (its validity ran out before the
      // reply, or it was declared lost meanwhile): the key holds our token for a new TTL.
      if (reply === 'ok' && this.stateNow === 'lost') await this.#giveBack();
      this.assertHeld();
      this.extended(sentAt, ttl);
    });
  }

  /**
   * Releases the lock. Resolves when it was held until now and is released; calling it again
   * resolves too. Rejects with {@link LeaseLostError} when the lease was lost before the release
   * (its validity ran out, even if nothing noticed it then, or someone else's lease now holds the
   * lock, which is left untouched), and with a `BackendError` when the backend could not be
   * reached (the lease then expires by its TTL). After {@link Lease.letExpire} it does nothing.
   */
  release(): Promise<void> {
    // Left to expire: the lock stays taken until its TTL (see letExpire).
    if (this.#leftToExpire && !this.#releasing) return Promise.resolve();
    // Not queued behind a renewal in flight: a release must not wait for a backend that hangs.
    this.#releasing ??= this.#releaseNow();
    return this.#releasing;
  }

  /** The release itself: a promise chain, not an async function (every lease's path). */
  #releaseNow(): Promise<void> {
    this.#watchdog?.stop();
    // A lease whose validity ran out is lost, though nothing watched it run out. Its key may
    // still hold our token (it expires in the backend later than our validity ends): it is
    // still released (which passes the lock on), and the loss reported once a live Redis
    // confirms it, or after GIVE_BACK_WAIT ms at the latest.
    const at = now();
    this.noticeExpiry(at);
    if (this.stateNow === 'lost') {
      return settleBy(this.#context.release(this, this.#keys, this.#token, at), at + GIVE_BACK_WAIT, () => this.lostError!)
        .catch(() => {})
        .then(() => {
          throw this.lostError;
        });
    }
    let call: Promise<OwnershipReply>;
    try {
      // Not waited for past the lease's validity: the lease is lost then (the release may
      // still run when Redis answers: it deletes only our token).
      call = this.#withinValidity(this.#context.release(this, this.#keys, this.#token, at), 'release');
    } catch (error) {
      call = Promise.reject(error);
    }
    return call.then(
      (reply) => {
        if (reply !== 'ok') return this.#lostBy(reply).then(() => this.#released());
        this.#released();
      },
      (error: unknown) => {
        if (this.lostError) throw this.lostError; // its validity ran out meanwhile
        this.#releasing = undefined; // a later call may try again
        // Unless one does, it ends as lost when its validity runs out (and is recorded then).
        this.watchExpiry();
        throw error;
      },
    );
  }

  /** The end of a release that reached the backend: released, unless the lease was lost before. */
  #released(): void {
    if (this.lostError) throw this.lostError;
    this.end('released', () => new LeaseReleasedError(this.key));
  }

  /**
   * Stops renewing the lease and leaves the lock taken until its TTL runs out, instead of
   * releasing it: for work that must not run twice in one period, such as a cron tick that every
   * replica fires. From then on `release()`, the end of a `withLock` scope, `await using` and
   * `locks.close()` leave the lock alone; the lease still ends (its `signal` aborts with a
   * `LeaseLostError`, reason `expired`) when its validity runs out; a manager's observability
   * records that end as asked (`end: 'expired'`), not as a loss. Calling it again, or on a lease
   * that ended, changes nothing; on a reentrant handle it applies to the lease the handle joined.
   */
  letExpire(): void {
    this.noticeExpiry();
    if (this.#leftToExpire || this.stateNow !== 'held') return;
    this.#leftToExpire = true;
    this.#watchdog?.stop();
    this.#watchdog = undefined;
    this.#context.onLetExpire?.(this);
    // Its end is noticed when it comes, not at the next look: the manager's observer records it
    // then (an unref'd timer: it holds no process open).
    this.watchExpiry();
  }

  /** True once {@link Lease.letExpire} was called on it: nothing releases it, it ends at its TTL. */
  get leftToExpire(): boolean {
    return this.#leftToExpire;
  }

  /** `await using lease = await locks.acquire(...)` releases it at the end of the block. */
  [asyncDispose](): Promise<void> {
    return this.release();
  }

  /** @internal Used by the watchdog: one renewal; true when extended, false when the lease is gone. */
  async renew(): Promise<void> {
    const onRenew = this.#context.onRenew;
    if (!onRenew) return this.extend(this.ttl);
    try {
      await this.extend(this.ttl);
    } catch (error) {
      onRenew(this, error);
      throw error;
    }
    onRenew(this, undefined);
  }

  /** @internal A batched renewal's outcome (the manager's Renewals): see `Renewable.renewed` in watchdog.ts. */
  renewed(sentAt: number, reply: OwnershipReply | Error, late = false, at?: number): Promise<void> | undefined {
    // Released meanwhile, or being released: the release wins, whatever the batch found.
    if (this.#releasing || this.stateNow === 'released') return undefined;
    this.noticeExpiry(at);
    let outcome: Promise<void> | undefined;
    if (this.stateNow === 'lost') {
      // Its validity ran out before the reply (or it was lost meanwhile): a key the batch
      // extended holds our token for a new TTL, and is given back.
      if (reply === 'ok') void this.#giveBack();
      outcome = Promise.reject(this.lostError!);
    } else if (reply instanceof Error) {
      outcome = Promise.reject(reply); // the watchdog tries again while validity remains
    } else if (reply !== 'ok') {
      outcome = this.#lostBy(reply).then(() => Promise.reject(this.lostError!));
    } else {
      this.extended(sentAt, this.ttl);
    }
    const onRenew = late ? undefined : this.#context.onRenew;
    if (!onRenew) return outcome;
    if (!outcome) return void onRenew(this, undefined);
    return outcome.catch((error: unknown) => {
      onRenew(this, error);
      throw error;
    });
  }

  /** Leaves the token out of JSON, so a logged lease never leaks it. */
  toJSON(): Record<string, unknown> {
    return { key: this.key, fence: this.fence, ttl: this.ttl, state: this.stateNow, timeLeft: Math.round(this.timeLeft()) };
  }

  [inspect.custom](): string {
    return `Lease ${inspect(this.toJSON())}`;
  }

  #serial<T>(step: () => Promise<T>): Promise<T> {
    // The chain starts at the first extend: most leases are never extended by hand (a promise fewer each).
    const run = (this.#queue ?? Promise.resolve()).then(step, step);
    this.#queue = run.catch(() => {});
    return run;
  }

  /**
   * A call to the backend, not waited for past the lease's validity (a Redis that does not
   * answer): the lease is lost then, with an UnreachableError as the cause, and `late` sees the
   * reply if it comes. A backend that bounds its own calls needs no deadline.
   */
  #withinValidity(call: Promise<OwnershipReply>, operation: string, late?: (reply: OwnershipReply) => void): Promise<OwnershipReply> {
    const { backend } = this.#context;
    if (backend.boundsCalls) return call;
    return settleBy(
      call,
      this.validUntil,
      () => {
        this.lose(lossOf(this.key, this.fence, 'unreachable', unreachableFor(this.#context.backend, this.key, operation, this.#acquiredAt)));
        return this.lostError!;
      },
      late && { late },
    );
  }

  /**
   * Deletes the key if it still holds our token, for a lease that counts as lost but may still
   * hold it (an extend that succeeded too late). A plain release in the backend, never a hand-off
   * to a waiter of this process; if it fails, the key expires by its TTL.
   */
  async #giveBack(): Promise<void> {
    await this.#context.backend.release(this.#keys, this.#token).catch(() => {});
  }

  /** Loses the lease the backend found gone or taken (as `forced` when a forced release's note says so). */
  async #lostBy(reply: 'gone' | 'taken'): Promise<void> {
    this.lose(lossOf(this.key, this.fence, await reasonOfLoss(this.#context.backend, this.#keys, this.#token, reply)));
  }

  protected override expire(): void {
    // A release in flight when the validity ran out got no answer in time: the backend was not
    // reached (as #withinValidity reports it, whichever of the two timers fires first).
    if (this.#releasing !== undefined) {
      this.lose(lossOf(this.key, this.fence, 'unreachable', unreachableFor(this.#context.backend, this.key, 'release', this.#acquiredAt)));
      return;
    }
    const watchdog = this.#watchdog;
    const unreachable = watchdog && (watchdog.lastError !== undefined || watchdog.renewing);
    this.lose(lossOf(this.key, this.fence, unreachable ? 'unreachable' : 'expired', unreachable ? unreachableFor(this.#context.backend, this.key, 'extend', this.#acquiredAt, watchdog.lastError) : undefined));
  }

  protected override ended(): void {
    this.#watchdog?.stop();
    this.#context.onEnd(this);
  }
}
