import type { KeysCache } from '../keys.js';
import type { LinkedSet } from '../linked-set.js';
import type { Lease, LeaseContext } from '../lease/lease.js';
import type { Observer } from '../observe/observer.js';
import type { TokenSource } from '../token.js';
import type { WaitContext } from '../wait/wait-context.js';
import type { LastMade } from './last-made.js';
import type { Settings } from './settings.js';

/** What the manager's rooms (locks, permits, multi-locks, reentrancy) share: made once per manager. */
export interface ManagerContext extends WaitContext {
  readonly settings: Settings;
  readonly tokens: TokenSource;
  readonly lockKeys: KeysCache;
  /** Metrics, spans, hooks and logs; undefined when nothing listens (every instrumentation point is then skipped). */
  readonly observer: Observer | undefined;
  readonly leaseContext: LeaseContext;
  /** Every lease of the manager not yet ended: `close()` releases them. A {@link LinkedSet}: leases come and go thousands of times a second. */
  readonly held: LinkedSet<Lease>;
  /** The last waiter and lease made, kept so that V8 keeps their shapes (see last-made.ts). */
  readonly lastMade: LastMade;
  /** True once `close()` was called. */
  isClosed(): boolean;
  /** Throws a ClosedError once `close()` was called. */
  assertOpen(): void;
  /** A new waiter's member name, `<managerId>:<n>`: its name in the backend's queue and the inbox. */
  nextMember(): string;
}
