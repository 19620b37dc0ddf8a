/**
 * A waiter's interest in its manager's inbox's grants for one lock: taken once per wait, given
 * back at the wait's exit to the inbox it was taken in (even once the manager opened another), and
 * taken again in the new inbox when the one it was taken in ended for good (a subscriber whose
 * retry strategy gave up: releases would pass the waiter over for want of a listener).
 */
import type { Inbox } from '../backend/backend.js';
import type { LockKeys } from '../keys.js';
import type { InboxListener } from './inbox-listener.js';

export class InboxInterest {
  /** True once the wait tried to have the inbox listen for this lock (until that inbox ended). */
  asked = false;
  readonly #listener: InboxListener;
  readonly #keys: LockKeys;
  /** The inbox it holds the interest in, once taken; undefined: none. */
  #inbox: Inbox | undefined = undefined;

  constructor(listener: InboxListener, keys: LockKeys) {
    this.#listener = listener;
    this.#keys = keys;
  }

  /** Takes the interest; resolves once the inbox listens. `done`: the wait left meanwhile (then nothing is taken). */
  take(done: () => boolean): Promise<void> {
    this.asked = true;
    return this.#listener.open().then(async (opened) => {
      if (done()) return; // left meanwhile: nothing to give back later
      this.#inbox = opened;
      await opened.join(this.#keys);
    });
  }

  /** Gives the interest back, if it holds one. */
  giveBack(): void {
    const inbox = this.#inbox;
    this.#inbox = undefined;
    inbox?.leave(this.#keys);
  }

  /** True, once, when the inbox it was taken in ended for good: it is given back, and may be taken again. */
  lapsed(): boolean {
    if (!this.asked || this.#inbox?.ended?.() !== true) return false;
    this.giveBack();
    this.asked = false;
    return true;
  }
}
