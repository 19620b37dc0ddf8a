import type { Backend, Inbox } from '../backend/backend.js';
import type { LockKeys } from '../keys.js';

/** What the inbox does to a waiter it has a message for (a {@link Waiter} is one). */
export interface Listener {
  /** Set by a message that arrived while the waiter was not sleeping: it looks again at once. */
  woken: boolean;
  /** The fence of a grant announced in the inbox, until the waiter takes it. */
  granted: number | undefined;
  /** When the last attempt that found the lock busy was sent (monotonic ms), as its reply was read. */
  readonly lastSent: number;
  /** {@link Listener.lastSent} when the grant's message was read: the grant counts from there. */
  grantedFrom: number;
  /** True during a Redlock split-vote back-off: a wake-up message does not end it. */
  readonly jitter: boolean;
  /** Ends the current sleep early, while it sleeps. */
  readonly wake: (() => void) | undefined;
}

/**
 * A manager's inbox and the waiters it can wake: opened once, on the first wait that needs it, and
 * shared by every wait of the manager (locks and semaphores). A waiter is registered while it
 * talks to the backend, by its member name, which is what a release's grant message names.
 */
export class InboxListener {
  readonly #backend: Backend;
  readonly #managerId: string;
  readonly #waiting = new Map<string, Listener>();
  #inbox: Promise<Inbox> | undefined;
  /** The inbox once its connection is up: from then on no message to a lock it listens for is missed (but across a reconnect, which wakes everyone). */
  #ready: Inbox | undefined;

  constructor(backend: Backend, managerId: string) {
    this.#backend = backend;
    this.#managerId = managerId;
  }

  /** True when a grant for this lock would reach this manager now. */
  listening(keys: LockKeys): boolean {
    return this.#ready?.listening(keys) === true;
  }

  add(member: string, listener: Listener): void {
    this.#waiting.set(member, listener);
  }

  delete(member: string): void {
    this.#waiting.delete(member);
  }

  /** Opens the inbox once; later calls share it (a new one once its connection ended for good). */
  open(): Promise<Inbox> {
    const dead = this.#ready;
    if (dead?.ended?.()) {
      this.#inbox = undefined;
      this.#ready = undefined;
      void dead.close().catch(() => {});
    }
    if (!this.#inbox) {
      const opening = this.#backend.watchInbox(this.#managerId, (member, fence) => this.#deliver(member, fence));
      opening.then(
        (inbox) => {
          if (this.#inbox === opening) this.#ready = inbox;
        },
        () => {
          if (this.#inbox === opening) this.#inbox = undefined;
        },
      );
      this.#inbox = opening;
    }
    return this.#inbox;
  }

  /**
   * Closes the inbox if it opened. One still opening is not waited for (a subscriber that cannot
   * connect may never finish): it is closed when it opens, and a Redis backend's close, which
   * follows, ends its opening at once.
   */
  async close(): Promise<void> {
    const opened = this.#ready;
    const opening = this.#inbox;
    this.#inbox = undefined;
    this.#ready = undefined;
    if (opened) await opened.close();
    else void opening?.then((inbox) => inbox.close(), () => {});
  }

  #deliver(member: string | undefined, fence: number | undefined): void {
    if (member === undefined || fence === undefined) {
      // Reconnected: messages may have been lost. Everyone looks again.
      for (const waiter of this.#waiting.values()) {
        waiter.woken = true;
        waiter.wake?.();
      }
      return;
    }
    // A waiter that left already: its exit found the grant and released it.
    const waiter = this.#waiting.get(member);
    if (!waiter) return;
    if (fence === 0) {
      // A wake-up, not a grant: a Redlock node freed the lock (the waiter asks the quorum again),
      // or a grant on Cluster, which the waiter confirms with its own attempt (see openLockInbox).
      waiter.woken = true;
      if (!waiter.jitter) waiter.wake?.();
      return;
    }
    // Taken by the wait without a round trip. The grant counts from the last attempt answered busy
    // before this message was read, never from one in flight: a message read while an attempt is
    // in flight may be older than that attempt (its process was paused or busy while the message
    // waited in its socket), and the lock it granted may have expired before the attempt ran and
    // found it held by another (the fault soak, seed 696453680: a holder paused 1 s took a lease
    // that had expired 350 ms before, with the validity of its attempt sent after the pause). With
    // too little validity left from that earlier attempt, the waiter attempts once more, which finds
    // the lock holding its token (a fresh grant) and wins, or not (a stale one).
    waiter.granted = fence;
    waiter.grantedFrom = waiter.lastSent;
    waiter.wake?.();
  }
}
