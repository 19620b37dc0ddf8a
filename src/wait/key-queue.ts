import type { Lease } from '../lease/lease.js';
import type { Waiter } from './waiter.js';

/**
 * A lock's state in one manager: the lease this process holds on it, and the callers of this
 * process waiting for it, first come, first served. Only the head talks to the backend; the
 * others wait in memory until the head is served or a lease of this process is handed to them.
 */
export class KeyQueue {
  readonly name: string;
  holder: Lease | undefined = undefined;
  readonly waiters: Waiter[] = [];
  /** Consecutive hand-offs to waiters of this process; bounded so that other processes get a turn. */
  streak = 0;

  constructor(name: string) {
    this.name = name;
  }

  /** Nothing of this process holds or waits for the lock: the manager may forget it. */
  get idle(): boolean {
    return !this.holder && this.waiters.length === 0;
  }

  /** A lease of this process holds the lock, or callers of it wait (a lease whose validity ran out is ended first). */
  busy(): boolean {
    this.holder?.watchExpiry();
    return this.holder !== undefined || this.waiters.length > 0;
  }

  /** Takes `waiter` out of the queue through its one exit (`won`: with a lease). */
  leave(waiter: Waiter, won: boolean): void {
    const index = this.waiters.indexOf(waiter);
    if (index >= 0) this.waiters.splice(index, 1);
    waiter.exit(won);
  }

  /** The head when it may talk to the backend (no lease of this process holds the lock), made active; else undefined. */
  nextToServe(): Waiter | undefined {
    const head = this.waiters[0];
    if (this.holder || !head || head.state !== 'queued') return undefined;
    head.state = 'active';
    clearTimeout(head.timer);
    return head;
  }
}
