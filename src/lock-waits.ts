import type { OwnershipReply } from './backend/backend.js';
import { undecided } from './backend/quorum.js';
import { now, validUntil } from './clock.js';
import { LockAbortedError, LockTimeoutError, QuorumError } from './errors.js';
import type { LockKeys } from './keys.js';
import { Lease } from './lease/lease.js';
import type { RenewOptions } from './lease/watchdog.js';
import type { ManagerContext } from './manager/context.js';
import type { CallSettings } from './manager/settings.js';
import type { AcquireTrace } from './observe/observer.js';
import { attempt, onceLimit } from './wait/attempt.js';
import { HeldLately } from './wait/held-lately.js';
import { KeyQueue } from './wait/key-queue.js';
import type { Attempt, Grant } from './wait/wait-context.js';
import { Waiter } from './wait/waiter.js';

/** How many locks' queues a manager keeps while idle (see LockWaits.#forget): a few hundred bytes each. */
const IDLE_QUEUES = 256;

/**
 * The locks of one manager: each lock's local queue ({@link KeyQueue}), its waiters' way to the
 * backend, and the leases they get. A lease's release hands the lock to the next caller of this
 * process, when there is one, in the release's own round trip.
 */
export class LockWaits {
  readonly #ctx: ManagerContext;
  readonly #queues = new Map<string, KeyQueue>();
  /** Locks found held or waited for lately: their lone callers queue at once, and release in full. */
  readonly #heldLately = new HeldLately();

  constructor(ctx: ManagerContext) {
    this.#ctx = ctx;
  }

  /** True when a lease of this process holds `name` or callers of it wait for it. */
  busy(name: string): boolean {
    return this.#queues.get(name)?.busy() === true;
  }

  /**
   * Acquires `keys`: at once when nobody of this process holds or waits for it and the lock is
   * free; else queued behind this process's callers, then in the backend. `once`: one try.
   */
  acquire(keys: LockKeys, call: CallSettings, once: boolean, trace?: AcquireTrace): Promise<Lease | null> {
    if (once) return this.#tryOnce(keys, call, trace);
    const { ttl, wait, signal, strategy, renew } = call;
    const ctx = this.#ctx;
    // A lease of this process on the lock: ended now if its validity already ran out, else watched,
    // so that its expiry passes the lock on to the caller about to queue behind it.
    this.#queues.get(keys.name)?.holder?.watchExpiry();
    const queue = this.#queue(keys.name);
    const started = now();
    const waiter = new Waiter(ctx, {
      keys,
      member: ctx.nextMember(),
      token: ctx.tokens.next(),
      ttl,
      renew,
      strategy,
      started,
      deadline: started + wait,
      state: 'queued',
    });
    ctx.lastMade.waiter = waiter;
    waiter.listenTo(signal, (reason) => this.#stop(queue, waiter, reason));
    queue.waiters.push(waiter);
    if (!queue.holder && queue.waiters.length === 1) {
      // Nobody of this process holds or waits for the lock: try at once (the common, uncontended
      // case). Callers arriving meanwhile queue behind.
      waiter.state = 'active';
      const heldLately = this.#heldLately.has(keys.name, started);
      waiter.probe = !heldLately;
      // A promise chain, not an async function: this is every lone caller's path. Its attempt
      // counts as sent when the call started (a few µs earlier: a validity that much shorter).
      return waiter.attempt(started).then(
        (first: Attempt): Lease | Promise<Lease> => {
          const grant = waiter.won(first);
          if (grant) return this.#leaseFor(queue, waiter, grant);
          if (!first.reply.acquired) this.#heldLately.mark(keys.name, first.sentAt);
          if (trace) trace.contended = true;
          // Waiting continues from this attempt (no extra one), unless it won too late to be of use.
          return this.#serve(queue, waiter, first.reply.acquired ? undefined : first);
        },
        (error: unknown) => {
          this.#leave(queue, waiter);
          throw error;
        },
      );
    }
    if (trace) trace.contended = true; // held or waited for here: this call waits
    waiter.keepScope(); // it may be served from another caller's context (a release, a hand-off)
    return new Promise<Lease>((resolve, reject) => {
      waiter.resolve = resolve;
      waiter.reject = reject;
      this.#pump(queue);
      // (A wait past 2^31 - 1 ms, about 25 days, needs no timer: setTimeout cannot hold it anyway.)
      if (waiter.state === 'queued' && wait < 2 ** 31) {
        // Queued behind callers of this process: the deadline ends the wait even while it waits in memory.
        waiter.timer = setTimeout(() => {
          const timeout = new LockTimeoutError(keys.name, now() - started, waiter.attempts, undefined, this.#heldBy(queue, waiter), queue.holder !== undefined);
          this.#stop(queue, waiter, timeout);
        }, Math.max(0, wait));
      }
    });
  }

  /** Several leases won together in one atomic step (see `acquireAll`), one per key. */
  leasesTogether(keys: readonly LockKeys[], token: string, fences: readonly number[], ttl: number, sentAt: number, renew: RenewOptions | undefined): Lease[] {
    return keys.map((k, i) => this.#lease(this.#queue(k.name), k, token, fences[i]!, ttl, sentAt, renew, undefined));
  }

  /** Stops every wait (they reject with a LockAbortedError); resolves once every waiter has left. */
  stopAll(): Promise<unknown> {
    const left: Promise<void>[] = [];
    for (const queue of this.#queues.values()) {
      for (const waiter of [...queue.waiters]) {
        this.#stop(queue, waiter, new LockAbortedError(waiter.keys.name, 'the manager was closed'));
        left.push(waiter.whenDone());
      }
    }
    return Promise.all(left);
  }

  /**
   * Releases a lease. When a caller of this process waits for the same lock, the lock is handed to
   * it in the release's own round trip (a new token and a new fence), up to `localHandoffs` times
   * in a row; then it goes to the next waiter of another process, if any. `at`: when the release
   * began (monotonic ms).
   */
  release(lease: Lease, keys: LockKeys, token: string, at: number): Promise<OwnershipReply> {
    const { backend, settings } = this.#ctx;
    const queue = this.#queues.get(keys.name);
    const next = queue?.holder === lease && settings.localHandoffs > 0 && backend.handsOff ? queue.waiters[0] : undefined;
    if (!queue || !next || next.state !== 'queued') {
      if (backend.releaseAlone && !this.#heldLately.has(keys.name, at)) {
        return backend.releaseAlone(keys, token, () => this.#heldLately.mark(keys.name, at)); // someone waited after all
      }
      // Without a hand-off, a release never answers one: the reply is an OwnershipReply.
      return backend.release(keys, token) as Promise<OwnershipReply>;
    }
    return this.#handOff(queue, next, keys, token);
  }

  /** A release that hands the lock to `next`, the first caller of this process waiting for it. */
  async #handOff(queue: KeyQueue, next: Waiter, keys: LockKeys, token: string): Promise<OwnershipReply> {
    const { backend, settings, driftFactor } = this.#ctx;
    const lease = queue.holder!;
    next.state = 'active'; // being handed the lock: not for the timeout or the pump to take
    const sentAt = now();
    let reply;
    try {
      reply = await backend.release(keys, token, { token: next.token, ttl: next.ttl, passOn: queue.streak >= settings.localHandoffs });
    } catch (error) {
      this.#requeue(queue, next); // the lease may have ended meanwhile (its expiry): the waiter goes on
      throw error;
    }
    if (typeof reply !== 'object') {
      this.#requeue(queue, next); // released to another process, or lost: the waiter queues in the backend
      return reply;
    }
    if (validUntil(sentAt, next.ttl, driftFactor) <= now()) {
      // The round trip outlasted the new lease's validity: give it back; the waiter tries again
      // (with the same token, sent after this release) once the old lease has ended.
      backend.release(keys, next.token).catch(() => {});
      this.#requeue(queue, next);
      return 'ok';
    }
    this.#ctx.held.delete(lease);
    queue.streak++;
    // Made in the waiter's own async context, not the releasing caller's.
    next.inScope(() => this.#deliver(next, this.#leaseFor(queue, next, { fence: reply.handedOff, sentAt, replicated: undefined })));
    return 'ok';
  }

  /** A lease ended (released or lost): the lock's next waiter of this process may go on. */
  leaseEnded(lease: Lease): void {
    const queue = this.#queues.get(lease.key);
    if (!queue || queue.holder !== lease) return;
    queue.holder = undefined;
    queue.streak = 0;
    this.#pump(queue);
    this.#forget(queue);
  }

  async #tryOnce(keys: LockKeys, call: CallSettings, trace: AcquireTrace | undefined): Promise<Lease | null> {
    const { backend, driftFactor } = this.#ctx;
    if (this.busy(keys.name)) {
      if (trace) trace.contended = true;
      return null;
    }
    const token = this.#ctx.tokens.next();
    const sentAt = now();
    const reply = await attempt(backend, keys, token, call.ttl, undefined, onceLimit(keys, call.ttl, backend));
    if (!reply.acquired) {
      if (trace) trace.contended = true;
      if (reply.outcome && undecided(reply.outcome)) throw new QuorumError(keys.name, reply.outcome);
      return null;
    }
    // Too late to be of use, or another call of this process got in while this one was in flight
    // (both cannot hold it): give it back.
    if (validUntil(sentAt, call.ttl, driftFactor) <= now() || this.#queues.get(keys.name)?.holder) {
      await backend.release(keys, token).catch(() => {});
      return null;
    }
    return this.#lease(this.#queue(keys.name), keys, token, reply.fence, call.ttl, sentAt, call.renew, reply.replicated);
  }

  /** The head's wait in the backend, from its probe's attempt (`first`) or from scratch; it leaves the queue either way. */
  async #serve(queue: KeyQueue, head: Waiter, first?: Attempt): Promise<Lease> {
    let grant: Grant;
    try {
      grant = await head.waitRemotely(first);
    } catch (error) {
      this.#leave(queue, head);
      throw error;
    }
    const lease = this.#leaseFor(queue, head, grant);
    if (head.stop) {
      // Stopped between the win and now: the lease is released, which passes the lock on.
      lease.release().catch(() => {});
      throw head.stop.reason;
    }
    return lease;
  }

  /** Lets the head of the queue talk to the backend when this process holds no lease on the lock. */
  #pump(queue: KeyQueue): void {
    const head = queue.nextToServe();
    if (!head) return;
    head.inScope(() => this.#serve(queue, head)).then(head.resolve, head.reject);
  }

  /**
   * Who holds a lock that `waiter` waits for in memory, as far as this process knows: a lease of
   * its own, under the name this manager records (`holder` option), else what the waiter or the
   * one talking to the backend for this process saw at its last attempt.
   */
  #heldBy(queue: KeyQueue, waiter: Waiter): string | undefined {
    if (queue.holder) return this.#ctx.settings.holder;
    return waiter.heldBy ?? queue.waiters.find((w) => w.state === 'active')?.heldBy;
  }

  /** Ends a wait: at once while queued in memory; an active waiter ends through its own loop or attempt. */
  #stop(queue: KeyQueue, waiter: Waiter, reason: unknown): void {
    if (waiter.state !== 'queued') {
      waiter.requestStop(reason);
      return;
    }
    this.#leave(queue, waiter);
    waiter.reject(reason);
  }

  /** A waiter leaves without a lease: out of the local queue through its one exit; the next one goes on. */
  #leave(queue: KeyQueue, waiter: Waiter): void {
    queue.leave(waiter, false);
    this.#pump(queue);
    this.#forget(queue);
  }

  /** A waiter that was to be handed the lock goes back to waiting (first in line), unless it was stopped meanwhile. */
  #requeue(queue: KeyQueue, waiter: Waiter): void {
    waiter.state = 'queued';
    if (waiter.stop) {
      this.#leave(queue, waiter);
      waiter.reject(waiter.stop.reason);
      return;
    }
    this.#pump(queue);
  }

  /** Gives a handed-off lease to its waiter, unless the waiter gave up meanwhile: then it is released (and passed on). */
  #deliver(waiter: Waiter, lease: Lease): void {
    if (waiter.stop) {
      waiter.reject(waiter.stop.reason);
      lease.release().catch(() => {});
      return;
    }
    waiter.resolve(lease);
  }

  /**
   * The lease of a waiter that got the lock (its probe, its wait, or a local hand-off). The waiter
   * leaves the local queue first, so that the lease watches its expiry only when other callers of
   * this process wait behind it (not for the waiter itself).
   */
  #leaseFor(queue: KeyQueue, waiter: Waiter, grant: Grant): Lease {
    queue.leave(waiter, true);
    return this.#lease(queue, waiter.keys, waiter.token, grant.fence, waiter.ttl, grant.sentAt, waiter.renew, grant.replicated);
  }

  #lease(queue: KeyQueue, keys: LockKeys, token: string, fence: number, ttl: number, sentAt: number, renew: RenewOptions | undefined, replicated: boolean | undefined): Lease {
    const ctx = this.#ctx;
    const lease = new Lease(ctx.leaseContext, keys, token, fence, ttl, sentAt, renew, replicated);
    ctx.lastMade.lease = lease;
    ctx.held.add(lease);
    queue.holder = lease;
    // Its expiry must be seen the moment it comes when a watchdog runs or callers of this process
    // wait behind it (they get the lock when it ends). This may end it at once, through onEnd.
    if (renew || queue.waiters.length > 0) lease.watchExpiry();
    if (ctx.isClosed()) void lease.release().catch(() => {});
    else ctx.holders.touch(sentAt); // who this manager is: written once, not per lease
    return lease;
  }

  #queue(name: string): KeyQueue {
    let queue = this.#queues.get(name);
    if (!queue) this.#queues.set(name, (queue = new KeyQueue(name)));
    return queue;
  }

  /**
   * Drops a lock's queue once this process neither holds nor waits for it, when the manager has
   * more than {@link IDLE_QUEUES} queues: a lock taken again and again (the common case) keeps
   * its queue instead of making a new one and resizing the map each time.
   */
  #forget(queue: KeyQueue): void {
    if (queue.idle && this.#queues.size > IDLE_QUEUES && this.#queues.get(queue.name) === queue) this.#queues.delete(queue.name);
  }
}
