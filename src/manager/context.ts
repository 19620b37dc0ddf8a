import type { KeysCache, LockKeys } from '../keys.js';
import { Lease, type LeaseContext } from '../lease/lease.js';
import type { RenewOptions } from '../lease/watchdog.js';
import type { Observer } from '../observe/observer.js';
import type { TokenSource } from '../token.js';
import type { WaitContext } from '../wait/waiter.js';
import type { Settings } from './settings.js';

/** What the manager's rooms (locks, permits, multi-locks, reentrancy) share: made once per manager. */
export interface ManagerContext extends WaitContext {
  readonly settings: Settings;
  readonly tokens: TokenSource;
  readonly lockKeys: KeysCache;
  /** Metrics, spans, hooks and logs; undefined when nothing listens (every instrumentation point is then skipped). */
  readonly observer: Observer | undefined;
  readonly leaseContext: LeaseContext;
  /** Every lease of the manager not yet ended: `close()` releases them. */
  readonly held: Set<Lease>;
  /** True once `close()` was called. */
  isClosed(): boolean;
  /** Throws a ClosedError once `close()` was called. */
  assertOpen(): void;
  /** A new waiter's member name, `<managerId>:<n>`: its name in the backend's queue and the inbox. */
  nextMember(): string;
}

/**
 * A new lease of the manager, registered in `held`. A lease made after `close()` (its acquire was
 * in flight) is released at once; the caller still gets it, already ended.
 */
export function newLease(
  ctx: ManagerContext,
  keys: LockKeys,
  token: string,
  fence: number,
  ttl: number,
  sentAt: number,
  renew: RenewOptions | undefined,
  replicated: boolean | undefined,
): Lease {
  const lease = new Lease(ctx.leaseContext, keys, token, fence, ttl, sentAt, renew, replicated);
  ctx.held.add(lease);
  return lease;
}
