/**
 * What a lease shares with the manager that made it, and with the reentrant handles that join it.
 * Generic in the lease type, so that this module needs nothing of lease.ts.
 */
import type { Backend, OwnershipReply } from '../backend/backend.js';
import type { LockKeys } from '../keys.js';
import type { Renewals } from './renewals.js';

/** What a lease needs from the manager that made it. */
export interface LeaseContext<L> {
  readonly backend: Backend;
  readonly driftFactor: number;
  /** Releases in the backend, passing the lock on to a waiter of this process when there is one. `at`: when the release began (monotonic ms). */
  readonly release: (lease: L, keys: LockKeys, token: string, at: number) => Promise<OwnershipReply>;
  /** Called once when the lease ends (released or lost), so the manager can forget it. */
  readonly onEnd: (lease: L) => void;
  /** Called after each watchdog renewal, with its error when it failed (only when the manager observes). */
  readonly onRenew?: ((lease: L, error: unknown) => void) | undefined;
  /** The manager's renewal scheduler: every watchdog of its leases renews through it (batched). */
  readonly renewals: Renewals;
  /** Keeps the manager's holder registration alive while its leases are renewed (see HolderNames.touch). */
  readonly touchHolder?: (() => void) | undefined;
  /** The lease was left to expire (`Lease.letExpire`): the manager no longer releases it at `close()`. */
  readonly onLetExpire?: ((lease: L) => void) | undefined;
}

/** @internal What a reentrant handle shares with the lease it joined (see `Lease.addHold`). */
export interface Hold<L> {
  /** Gives the hold back; later calls change nothing. */
  readonly leave: () => void;
  readonly context: LeaseContext<L>;
  readonly keys: LockKeys;
  readonly sentAt: number;
}
