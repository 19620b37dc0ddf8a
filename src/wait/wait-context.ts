/** What a waiter needs from its manager, and what its attempts and its win look like. */
import type { AcquireReply, Backend } from '../backend/backend.js';
import type { HolderNames } from '../holder-names.js';
import type { InboxListener } from './inbox-listener.js';
import type { QueueKeeper } from './queue-keeper.js';
import type { WaitTuning } from './strategy.js';

/** What a waiter needs from its manager. */
export interface WaitContext {
  readonly backend: Backend;
  readonly inbox: InboxListener;
  /** Keeps the queue entries of sleeping waiters in batches (absent: each waiter re-checks by itself). */
  readonly keeper?: QueueKeeper;
  readonly driftFactor: number;
  readonly tuning: WaitTuning;
  /** Clean-ups of waiters that left (queue entries being removed): `close()` lets them finish. */
  readonly leaving: Set<Promise<unknown>>;
  /** This manager's holder registration, and the descriptions of the holders it met (a timeout names them). */
  readonly holders: HolderNames;
}

/** One attempt of a waiter: its reply, when it was sent, and whether the inbox listened then. */
export interface Attempt {
  readonly reply: AcquireReply;
  readonly sentAt: number;
  readonly inboxWasListening: boolean;
  /**
   * True when Redis refused the attempt without running it (`isSlotRefusal`: a Cluster slot
   * that migrates): `reply` is then a stand-in, busy with a `retryAfter`, and says nothing of the lock.
   */
  readonly refused?: boolean;
}

/** What a waiter won: the fence, when the attempt that won it was sent, and the replica acknowledgement. */
export interface Grant {
  readonly fence: number;
  readonly sentAt: number;
  readonly replicated: boolean | undefined;
}
