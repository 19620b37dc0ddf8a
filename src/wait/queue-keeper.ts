import type { Backend, KeepReply, KeptEntry } from '../backend/backend.js';
import { now } from '../clock.js';
import { Deadlines } from '../deadlines.js';
import type { InboxListener } from './inbox-listener.js';
import type { WaitTuning } from './strategy.js';

/** How many waiters one keep-queued.lua call carries at most. */
export const KEEP_BATCH = 500;

/**
 * How long the keeper lets the inbox wake a waiter it reported `told` (its entry gone, a wake-up
 * published to its inbox after any grant's message) before it wakes it itself: the messages to
 * its inbox may be lost (a subscriber connection that drops them), and the waiter must not be
 * left to its holder's TTL. Its wake-up then waits for the I/O the event loop has read by then
 * (setImmediate), so a message that arrived with the keeper's reply, or within the grace, is
 * handled first.
 */
export const TOLD_GRACE_MS = 50;

/** A waiter the keeper keeps queued while it sleeps (a `Waiter` is one). */
export interface KeptWaiter extends KeptEntry {
  /** Monotonic ms; Infinity: none. No sleep goes past it. */
  readonly deadline: number;
  /**
   * When its last call that found the lock held by another token was sent (monotonic ms): a grant
   * counts from there. The keeper's call counts when it found so: a release that grants the lock
   * after it ran sets the lease's TTL after it was sent.
   */
  lastSent: number;
  /** Ends its sleep, while it sleeps. */
  wake: (() => void) | undefined;
  /** While it sleeps kept: sets its wake-up `ms` from now (the holder's TTL the keeper saw; never past the deadline). */
  rearm: ((ms: number) => void) | undefined;
}

/**
 * The wake-ups of kept waiters (their holder's TTL, their deadline), all on one timer: a sleep
 * ends nearly always by a grant long before its wake-up, and a timer of its own (setTimeout, then
 * clearTimeout) cost a waiting process more than the rest of its wake-up (`node
 * bench/trace-handoff.mjs`). Unref'd: a kept waiter's inbox is listening, and its subscriber
 * connection holds the process open.
 */
const wakeUps = new Deadlines();

/**
 * The last wake-up made, kept until the next: with none alive at a full GC, V8 would drop the
 * shapes it takes on the timer's list and the optimized code that embeds them (see
 * manager/last-made.ts).
 */
const lastMade: { wakeUp: object | undefined } = { wakeUp: undefined };

/**
 * Sleeps `waiter` up to `ms` (its holder's TTL, or its deadline), kept by `keeper`, which may move
 * that wake-up to a later holder's TTL or wake it at once (see {@link QueueKeeper}). Its `wake`
 * ends the sleep as any sleep's does; nothing is left watched, whichever way it ends. `at`: the
 * time now, when the caller read it a moment ago.
 */
export function sleepKept(keeper: QueueKeeper, waiter: KeptWaiter, ms: number, at?: number): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = (): void => {
      wakeUps.delete(wakeUp);
      keeper.drop(waiter);
      waiter.rearm = undefined;
      waiter.wake = undefined;
      resolve();
    };
    // Its entry on wakeUps: `at` moves with each `rearm` (watched again: a later `at` stays in
    // place, and the timer looks at it again when it fires for the earlier one).
    const wakeUp = { at: Infinity, expire: done };
    lastMade.wakeUp = wakeUp;
    const arm = (delay: number, from: number = now()): void => {
      wakeUp.at = Math.min(from + Math.max(0, delay), waiter.deadline);
      wakeUps.watch(wakeUp);
    };
    arm(ms, at);
    waiter.wake = done;
    waiter.rearm = arm;
    keeper.keep(waiter);
  });
}

/**
 * A manager's queue keeper: its waiters queued for a lock in the backend and asleep (the `notify`
 * strategy, whose manager's inbox listens) make no attempt of their own to keep their place.
 * Every `recheck` ms the keeper refreshes all their queue entries and reads their locks' state in
 * one script call per {@link KEEP_BATCH} waiters ({@link Backend.keepQueued}), the calls spread
 * over the period, and wakes exactly those that must look for themselves: the lock is free (a
 * release nobody announced: a raw DEL, a lost message), or their entry is gone (dropped or
 * passed over: their attempt queues them again; or taken out by a grant whose message was lost:
 * their attempt finds the lock theirs). On one Redis a waiter whose entry is gone is woken through
 * its inbox, by a wake-up the keeper's call publishes after any grant's message (see
 * keep-queued.lua), so a grant that was only slow is taken without an attempt. A waiter whose lock
 * is held sleeps
 * on until the holder's TTL it reports runs out (then it attempts, as before: a crashed holder),
 * a grant in its inbox, or its own deadline or stop.
 *
 * On a Redis Cluster client a batch is one call per slot of its waiters (see cluster-batches.ts).
 * Where it does not apply, waiters re-check one by one every `recheck` ms as before: a backend
 * without `keepQueued` (the in-memory store, which has no round trips; Redlock; compat mode) or
 * one that declines, semaphores and what is built on them (fair locks, read-write locks), the
 * `backoff` strategy, and a manager whose inbox does not listen (then no grant can reach its
 * waiters).
 */
export class QueueKeeper {
  readonly #backend: Backend;
  readonly #inbox: InboxListener;
  readonly #tuning: WaitTuning;
  /** The waiters kept, each with the turn it was kept in (a reply for an earlier sleep is not for this one). */
  readonly #kept = new Map<KeptWaiter, number>();
  #turn = 0;
  #timer: NodeJS.Timeout | undefined = undefined;
  /** Batches sent and not answered: a tick while some are skips (a slow Redis is not sent more). */
  #inFlight = 0;
  /** Set once the backend declined ({@link Backend.keepQueued} resolved to undefined): waiters re-check themselves from then on. */
  #declined = false;
  /** Waiters reported `told`, each with its turn, and the wake-up of those the inbox did not wake within {@link TOLD_GRACE_MS}. */
  #told: [KeptWaiter, number][] = [];
  #toldTimer: NodeJS.Timeout | undefined = undefined;
  #toldImmediate: NodeJS.Immediate | undefined = undefined;

  constructor(backend: Backend, inbox: InboxListener, tuning: WaitTuning) {
    this.#backend = backend;
    this.#inbox = inbox;
    this.#tuning = tuning;
  }

  /** How many waiters it keeps now. */
  get size(): number {
    return this.#kept.size;
  }

  /** Whether `waiter`, queued for a lock in the backend, can sleep kept by this keeper. */
  applies(waiter: KeptEntry): boolean {
    return !this.#declined && this.#backend.keepQueued !== undefined && waiter.keys.semaphore === undefined && this.#inbox.listening(waiter.keys);
  }

  /** Keeps `waiter` from now until {@link QueueKeeper.drop}: each tick wakes it or moves its wake-up (see `sleepKept`). */
  keep(waiter: KeptWaiter): void {
    this.#kept.set(waiter, ++this.#turn);
    if (this.#timer === undefined) this.#arm();
  }

  /**
   * Stops keeping `waiter` (it woke, or left). When nobody is kept, the timer is left to run out
   * (its tick sends nothing and ends it) rather than cleared, unless the waiter `left` without the
   * lock (gave up, timed out, closed: nothing of the wait stays behind): a lock handed from process
   * to process keeps and drops a waiter at each hand-off, and clearing the timer and making a new
   * one each time cost a waiting process more than the rest of its wake-up.
   */
  drop(waiter: KeptWaiter, left = false): void {
    const dropped = this.#kept.delete(waiter);
    if (this.#kept.size > 0 || (!dropped && !left)) return;
    if (left) this.#clearTimer();
    this.#clearTold();
  }

  /**
   * One timer for the manager, running while it keeps someone, unref'd: a kept waiter's inbox is
   * listening, and its subscriber connection holds the process open. Each tick sends one batch,
   * of the waiters kept longest since their last: with n waiters, a batch every `recheck / ceil(n / KEEP_BATCH)` ms, so each
   * is kept once per `recheck`, and Redis runs one batch at a time, not a burst of all of them
   * in which every release would wait.
   */
  #arm(): void {
    if (this.#timer !== undefined) return;
    const batches = Math.max(1, Math.ceil(this.#kept.size / KEEP_BATCH));
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#tick();
      if (this.#kept.size > 0) this.#arm();
    }, this.#tuning.recheck / batches);
    this.#timer.unref();
  }

  #tick(): void {
    if (this.#inFlight > 0) return; // entries live 3 × recheck: a later tick refreshes them
    const entryTtl = this.#tuning.recheck * 3;
    const next: [KeptWaiter, number][] = [];
    for (const entry of this.#kept) {
      if (next.length === KEEP_BATCH) break;
      next.push(entry);
    }
    const items: [KeptWaiter, number][] = [];
    for (const [waiter, turn] of next) {
      // To the back of the line: the next ticks keep the others first.
      this.#kept.delete(waiter);
      this.#kept.set(waiter, turn);
      if (!this.#inbox.listening(waiter.keys)) {
        // The inbox is between two subscriptions: a grant would not reach it. Its own attempt
        // writes its entry anew, which tells a release that passed it over that it lives.
        waiter.wake?.();
        continue;
      }
      items.push([waiter, turn]);
    }
    if (items.length === 0) return;
    this.#inFlight++;
    const sentAt = now();
    let sent: Promise<readonly KeepReply[] | undefined>;
    try {
      sent = this.#backend.keepQueued!(
        items.map(([waiter]) => waiter),
        entryTtl,
      );
    } catch (error) {
      sent = Promise.reject(error);
    }
    sent
      .then(
        (replies) => {
          if (!replies) this.#decline();
          items.forEach(([waiter, turn], i) => this.#tell(waiter, turn, replies?.[i], sentAt));
        },
        // Redis did not answer, or failed: each waiter looks for itself (its attempt reports the error).
        () => items.forEach(([waiter, turn]) => this.#tell(waiter, turn, undefined, sentAt)),
      )
      .finally(() => this.#inFlight--);
  }

  /**
   * Tells `waiter` what its lock is doing, if it still sleeps the sleep it was kept for: held (its
   * wake-up moves to the holder's TTL); its entry gone and a wake-up sent to its inbox (`told`):
   * the inbox wakes it; anything else (free, gone, or unknown): it wakes and attempts. Held, a
   * grant later counts from `sentAt` (so it takes the lock without a round trip, as after an
   * attempt of its own).
   */
  #tell(waiter: KeptWaiter, turn: number, reply: KeepReply | undefined, sentAt: number): void {
    if (this.#kept.get(waiter) !== turn) return;
    // Its inbox wakes it, after the grant that took its entry out, if one did: woken by this
    // reply, read before that message, it would attempt for a lock that is already its own.
    if (reply === 'told') {
      this.#wakeUnlessTold(waiter, turn);
      return;
    }
    if (typeof reply === 'number' && waiter.rearm) {
      waiter.lastSent = Math.max(waiter.lastSent, sentAt);
      waiter.rearm(reply >= 0 ? reply + 1 : Infinity);
    } else {
      waiter.wake?.();
    }
  }

  /** The manager closed (every wait has ended): its timers go, whatever they were left to do. */
  close(): void {
    this.#clearTimer();
    this.#clearTold();
  }

  #clearTimer(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /** Forgets the waiters reported `told` and the wake-up pending for them, if any. */
  #clearTold(): void {
    if (this.#toldTimer === undefined && this.#toldImmediate === undefined) return;
    clearTimeout(this.#toldTimer);
    this.#toldTimer = undefined;
    clearImmediate(this.#toldImmediate);
    this.#toldImmediate = undefined;
    this.#told = [];
  }

  /** Wakes `waiter` after {@link TOLD_GRACE_MS} and the I/O read by then, if it still sleeps that sleep (its inbox's wake-up was lost). */
  #wakeUnlessTold(waiter: KeptWaiter, turn: number): void {
    this.#told.push([waiter, turn]);
    if (this.#toldTimer !== undefined || this.#toldImmediate !== undefined) return;
    this.#toldTimer = setTimeout(() => {
      this.#toldTimer = undefined;
      this.#toldImmediate = setImmediate(() => {
        this.#toldImmediate = undefined;
        const told = this.#told;
        this.#told = [];
        for (const [w, t] of told) if (this.#kept.get(w) === t) w.wake?.();
      });
    }, TOLD_GRACE_MS);
  }

  #decline(): void {
    this.#declined = true;
    for (const waiter of [...this.#kept.keys()]) waiter.wake?.();
  }
}
