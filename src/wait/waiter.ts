import { AsyncResource } from 'node:async_hooks';
import type { QuorumOutcome } from '../backend/quorum.js';
import { now, validUntil } from '../clock.js';
import { HolderSighting } from '../holder-names.js';
import type { LockKeys } from '../keys.js';
import type { Lease } from '../lease/lease.js';
import type { RenewOptions } from '../lease/watchdog.js';
import { giveUpError, leaveAndGiveBack, noReplyError } from './give-up.js';
import { InboxInterest } from './inbox-interest.js';
import { sleep } from './sleep.js';
import { nextDelay, type WaitStrategyName } from './strategy.js';
import { sleepKept, type KeptWaiter } from './queue-keeper.js';
import type { Attempt, Grant, WaitContext } from './wait-context.js';
import { enoughLeft, sendAttempt, winOf, type AttemptingWaiter } from './waiter-attempt.js';

/**
 * What a waiter is doing: `queued` in memory behind callers of its own process (a lock's local
 * queue), `active` talking to the backend (or being handed a lease), `done` once it left, with a
 * lease or without.
 */
export type WaiterState = 'queued' | 'active' | 'done';

/** What the caller decides about a wait. */
export type WaiterSpec = Pick<Waiter, 'keys' | 'member' | 'token' | 'ttl' | 'renew' | 'strategy' | 'started' | 'deadline' | 'state'>;

/**
 * One call waiting for a lock or for permits: a small state machine with one exit
 * ({@link Waiter.exit}). Whatever ends the wait (the lease, an abort before, during or after an
 * attempt, the deadline during a stalled attempt, `close()`, a backend error, a lost reply), the
 * exit takes the waiter out of the server's wait queue when it may be in it, gives back a lock a
 * reply won for it after it left, leaves the inbox and clears its timer and abort listener.
 */
export class Waiter implements AttemptingWaiter, KeptWaiter {
  readonly keys: LockKeys;
  /** `<managerId>:<waiterId>`: its name in the backend's wait queue and its manager's inbox. */
  readonly member: string;
  readonly token: string;
  readonly ttl: number;
  readonly renew: RenewOptions | undefined;
  readonly strategy: WaitStrategyName;
  /** Monotonic ms. */
  readonly started: number;
  readonly deadline: number;
  state: WaiterState;
  /** Set when the wait must end: the caller's signal aborted, `close()`, or its deadline while not active. */
  stop: { readonly reason: unknown } | undefined = undefined;
  attempts = 0;
  /** When the last attempt that found the lock busy was sent (monotonic ms): a grant read after its reply counts from there. */
  lastSent: number;
  granted: number | undefined = undefined;
  /** When the attempt that a grant counts from was sent: set with `granted` (see inbox-listener.ts). */
  grantedFrom = 0;
  /** A wake-up (or the inbox's reconnect) was read since the last attempt was sent: the sleep after a busy reply is skipped. */
  woken = false;
  /** Its interest in the inbox's grants for this lock (see inbox-interest.ts), made at its first join: a lone caller's acquire makes none. */
  #interest: InboxInterest | undefined = undefined;
  /** True once the inbox hears grants and wake-ups for it (from its first attempt that may queue): the exit takes it out. */
  heard = false;
  /** True from the moment an attempt that queues in the backend is sent: its exit then leaves the queue. */
  queuedRemotely = false;
  jitter = false;
  /** True once an attempt got a reply: a wait that never got one ends with an UnreachableError, not a timeout. */
  replied = false;
  /** The refusal of the last attempt, when Redis refused it for where its keys are (a Cluster slot that migrates); cleared by a reply. */
  refused: Error | undefined = undefined;
  /** Attempts refused in a row (or ended by the client's own timeout). */
  refusals = 0;
  /** The last attempt the client's own timeout ended ({@link isClientTimeout}): an unknown outcome, so the exit gives the token back. */
  timedOut: Error | undefined = undefined;
  /** True once an attempt won too late to be of use (see {@link Waiter.won}): an exit without a lease gives that lease back. */
  wonLate = false;
  /**
   * True for a lone caller's first attempt at a lock that was not found busy lately: it does not
   * queue in the backend (two keys and two arguments, the cheapest call). Found busy, the wait
   * queues with its next attempt, sent at once.
   */
  probe = false;
  /** The attempts of a wait go on after a refusal, with the same token: none is given back (see attempt.ts). */
  readonly retriesRefused = true;
  /** Who held the lock at the last attempt that found it held (a timeout names it); made at the first busy reply that names a holder. */
  #holder: HolderSighting | undefined = undefined;
  wake: (() => void) | undefined = undefined;
  /** While it sleeps kept by its manager's queue keeper: sets its wake-up at the holder's TTL anew (see queue-keeper.ts). */
  rearm: ((ms: number) => void) | undefined = undefined;
  cancel: ((reason: unknown) => void) | undefined = undefined;
  /** The deadline while it waits in memory behind callers of its own process. */
  timer: NodeJS.Timeout | undefined = undefined;
  /** The caller's async context, for a waiter that may be served from another's (a hand-off, a release that pumps the queue). */
  scope: AsyncResource | undefined = undefined;
  /** Settles the caller's promise (a lock's waiter; a semaphore's wait returns instead). */
  resolve: (lease: Lease) => void = () => {};
  reject: (error: unknown) => void = () => {};
  readonly #context: WaitContext;
  /** Removes the caller's abort listener. */
  #detach: (() => void) | undefined = undefined;
  /** Resolves {@link Waiter.whenDone}, once someone asked. */
  #done: (() => void) | undefined = undefined;

  constructor(context: WaitContext, spec: WaiterSpec) {
    this.#context = context;
    this.keys = spec.keys;
    this.member = spec.member;
    this.token = spec.token;
    this.ttl = spec.ttl;
    this.renew = spec.renew;
    this.strategy = spec.strategy;
    this.started = spec.started;
    this.deadline = spec.deadline;
    this.state = spec.state;
    this.lastSent = spec.started;
  }

  /** Records the caller's async context: whatever serves this waiter later runs in it. */
  keepScope(): void {
    this.scope ??= new AsyncResource('latchkey.waiter');
  }

  /** Runs `fn` in the caller's async context (see {@link Waiter.keepScope}). */
  inScope<T>(fn: () => T): T {
    return this.scope ? this.scope.runInAsyncScope(fn) : fn();
  }

  /** The error of an attempt that got no reply by the deadline: Redis unreachable if no attempt of this wait got one, else a timeout. */
  noReply(): Error {
    return noReplyError(this, this.#context.backend);
  }

  /** Calls `stop` with the signal's reason when the caller's signal aborts, until the exit. */
  listenTo(signal: AbortSignal | undefined, stop: (reason: unknown) => void): void {
    if (!signal) return;
    const onAbort = (): void => stop(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    this.#detach = () => signal.removeEventListener('abort', onAbort);
  }

  /** Asks an active wait to end (a stop): its loop or its attempt in flight ends with `reason`, and then exits. */
  requestStop(reason: unknown): void {
    if (this.state === 'done' || this.stop) return;
    this.stop = { reason };
    this.wake?.();
    this.cancel?.(reason);
  }

  /**
   * One attempt (see {@link sendAttempt}); `at`: when it counts as sent, if the caller read the clock
   * just before. A wake-up read before it is sent is answered by it (one during a Redlock's back-off
   * after a split vote, or while the inbox joins, no longer skips the sleep after a busy reply); one
   * read while it is in flight is not (its reply may be older), and skips that sleep.
   */
  attempt(at?: number): Promise<Attempt> {
    this.woken = false;
    return sendAttempt(this, this.#context, at);
  }

  /** The attempt's win, if it is still of use (see {@link winOf}). */
  won(a: Attempt): Grant | undefined {
    return winOf(this, a, this.#context);
  }

  /**
   * The wait: attempt, then sleep until an inbox message, the holder's TTL, a recheck or the
   * deadline; again until a win. `first`: an attempt already made (the probe), continued from.
   * Throws the stop's reason, or the timeout; the caller then calls {@link Waiter.exit}.
   */
  async waitRemotely(first?: Attempt): Promise<Grant> {
    const { keys, ttl } = this;
    const { driftFactor, tuning } = this.#context;
    const locks = keys.semaphore === undefined;
    let pending = first;
    for (;;) {
      let a = pending;
      pending = undefined;
      if (!a) {
        this.#throwIfStopped();
        const fence = this.#takeGrant();
        const from = this.grantedFrom;
        if (locks && fence !== undefined && enoughLeft(validUntil(from, ttl, driftFactor) - now(), ttl)) {
          // Granted by a release, without a round trip: valid from this waiter's last attempt
          // answered before the message was read, which reached Redis before the release did.
          // (With too little validity left, the next attempt refreshes it: the lock holds our token.)
          return { fence, sentAt: from, replicated: undefined };
        }
        a = await this.attempt();
      }
      const { reply, inboxWasListening } = a;
      if (!reply.acquired && !a.refused) {
        // (Not a refused attempt's: it did not reach the lock, and a grant counts from the last one that did.)
        this.lastSent = a.sentAt;
        if (reply.holderTag !== undefined) this.#holder ??= new HolderSighting(this.#context.holders);
        this.#holder?.note(reply.holderTag, this.deadline !== Infinity);
      }
      const grant = this.won(a);
      if (grant) return grant;
      this.#throwIfStopped();
      const outcome = reply.acquired ? undefined : reply.outcome;
      if (!reply.acquired && reply.retryAfter !== undefined && reply.retryAfter > 0) {
        // Redlock split vote: contenders back off for random times, or they split again. Or a
        // refused attempt (a Cluster slot that migrates): tried again after a short backoff.
        this.jitter = true;
        await this.#sleep(Math.min(reply.retryAfter, Math.max(0, this.deadline - now())));
        this.jitter = false;
        this.#throwIfStopped();
        if (this.deadline - now() <= 0) throw await this.#namedGiveUp(outcome);
        continue;
      }
      let t = now();
      let remaining = this.deadline - t;
      if (remaining <= 0) throw await this.#namedGiveUp(outcome);
      // Its inbox's connection ended for good (a retry strategy that gave up): it joins the one the
      // manager opens in its place, or releases would pass it over for want of a listener.
      this.#interest?.lapsed();
      if (this.strategy === 'notify' && this.#interest?.asked !== true) {
        if (inboxWasListening) {
          // Queued already: hold an interest in the inbox's grants for this lock while queued (on
          // Cluster another waiter's leave must not end the subscription under this one).
          this.#join().catch(() => {});
        } else {
          // Listen for grants first, then queue with the next attempt. Without an inbox the waiter
          // still wakes at the holder's TTL and at each recheck.
          if (await this.#joinInbox()) continue; // the lock may have been passed on before the inbox listened
          this.#throwIfStopped();
          t = now();
          remaining = this.deadline - t;
          if (remaining <= 0) throw await this.#namedGiveUp(outcome);
        }
      }
      if (!this.woken && this.granted === undefined) {
        // A semaphore's ttl 0: the queue holds it back, not a holder: only a wake-up or the recheck ends the sleep.
        const holderTtl = reply.acquired ? 0 : locks || reply.ttl > 0 ? reply.ttl : -1;
        const keeper = this.#context.keeper;
        if (this.strategy === 'notify' && this.queuedRemotely && !reply.acquired && keeper?.applies(this)) {
          // Kept queued by the manager's keeper, which wakes it when it must look (see queue-keeper.ts):
          // no re-check of its own, only the holder's TTL (as the keeper last saw it) and the deadline.
          await sleepKept(keeper, this, Math.min(holderTtl >= 0 ? holderTtl + 1 : Infinity, remaining), t);
        } else {
          await this.#sleep(Math.min(nextDelay(this.strategy, this.attempts - 1, holderTtl, tuning), remaining));
        }
      }
    }
  }

  /**
   * The one exit, whatever ended the wait; idempotent. `won`: the waiter leaves with a lease (the
   * backend took its queue entry out when it granted the lock). Otherwise a queue entry it may
   * have made is removed, and a lock granted to it meanwhile is released, which passes it on.
   */
  exit(won: boolean): void {
    if (this.state === 'done') return;
    this.state = 'done';
    clearTimeout(this.timer);
    this.timer = undefined;
    this.#detach?.();
    this.#detach = undefined;
    const { backend, inbox, keeper } = this.#context;
    keeper?.drop(this, !won);
    if (this.heard) inbox.delete(this.member);
    this.#interest?.giveBack();
    if (!won && (this.queuedRemotely || this.timedOut || this.wonLate)) {
      // A late win, or a timed-out attempt that may have taken the lock, is given back whatever
      // leave says (see leaveAndGiveBack).
      leaveAndGiveBack(backend, this.#context.leaving, this, this.queuedRemotely, this.wonLate || this.timedOut !== undefined);
    }
    this.#done?.();
  }

  /** Resolves once the waiter has left (see {@link Waiter.exit}). */
  whenDone(): Promise<void> {
    if (this.state === 'done') return Promise.resolve();
    return new Promise<void>((resolve) => {
      const earlier = this.#done;
      this.#done = () => {
        earlier?.();
        resolve();
      };
    });
  }

  /**
   * Has the inbox listen for this lock: true once it does. Bounded by the deadline and a stop (a
   * hung server may never confirm a subscription); wake-ups meanwhile do not end it.
   */
  async #joinInbox(): Promise<boolean> {
    const joining = this.#join();
    let joined: boolean | undefined;
    const settled = joining.then(
      () => (joined = true),
      () => (joined = false),
    );
    while (joined === undefined && !this.stop && this.deadline - now() > 0) {
      await Promise.race([settled, this.#sleep(this.deadline - now())]);
      this.wake?.();
    }
    return joined === true;
  }

  /** Takes one interest in the inbox's grants for this lock (given back by the exit); resolves once listening. */
  #join(): Promise<void> {
    this.#interest ??= new InboxInterest(this.#context.inbox, this.keys);
    return this.#interest.take(() => this.state === 'done');
  }


  #sleep(ms: number): Promise<void> {
    return sleep(ms, (wake) => (this.wake = wake)).then(() => {
      this.wake = undefined;
    });
  }

  #takeGrant(): number | undefined {
    const fence = this.granted;
    this.granted = undefined;
    return fence;
  }

  /** Throws the reason a wait was stopped for, if it was. (A method, so narrowing does not cross awaits.) */
  #throwIfStopped(): void {
    if (this.stop) throw this.stop.reason;
  }

  /** {@link Waiter.#giveUp}, once the lookup of who holds the lock answered (see {@link HolderSighting.settled}). */
  async #namedGiveUp(outcome: QuorumOutcome | undefined): Promise<Error> {
    await this.#holder?.settled();
    return giveUpError(this, this.#context.backend, outcome);
  }

  /** Who held the lock at the last attempt that found it held, when its manager registered: a timeout names it. */
  get heldBy(): string | undefined {
    return this.#holder?.who;
  }
}
