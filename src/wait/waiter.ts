import type { Lease } from '../lease/lease.js';
import type { RenewOptions } from '../lease/watchdog.js';
import type { LockKeys } from '../keys.js';
import type { WaitStrategyName } from './strategy.js';

/**
 * One call of `acquire` waiting for a lock. Waiters of one manager for one key queue in FIFO
 * order ({@link KeyState}); only the head talks to the backend (`active`), the others wait in
 * memory until the head is served or a lease of this process is handed to them.
 */
export interface Waiter {
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
  /** Set when the wait must end: the caller's signal aborted, `close()`, or its deadline while not active. */
  stop: { readonly reason: unknown } | undefined;
  /** queued: in memory; active: the head, talking to the backend (or being handed a lease); done: settled. */
  state: 'queued' | 'active' | 'done';
  attempts: number;
  /** When the last attempt that found the lock busy was sent (monotonic ms): a grant counts from there. */
  lastSent: number;
  /** True while an attempt waits for its reply. */
  inFlight: boolean;
  /** The fence of a grant announced in the inbox, until the waiter takes it. */
  granted: number | undefined;
  /** Set by an inbox message that arrived while it was not sleeping. */
  woken: boolean;
  /** True once it tried to have the manager's inbox listen for this lock (once per wait). */
  joined: boolean;
  /** True once it joined the inbox for this lock: it leaves it when it settles. */
  inboxJoined: boolean;
  /** True during a Redlock split-vote back-off: only a stop ends it early, not a wake-up message. */
  jitter: boolean;
  /** Ends the current sleep early, while it sleeps. */
  wake: (() => void) | undefined;
  /** Ends the attempt in flight with a reason (a stop), while one is in flight. */
  cancel: ((reason: unknown) => void) | undefined;
  timer: NodeJS.Timeout | undefined;
  resolve(lease: Lease): void;
  reject(error: unknown): void;
}

/** A lock's state in one manager: the lease this process holds on it, and its waiters in arrival order. */
export interface KeyState {
  readonly name: string;
  holder: Lease | undefined;
  readonly waiters: Waiter[];
  /** Consecutive hand-offs to waiters of this process; bounded so that other processes get a turn. */
  streak: number;
}

/**
 * A new waiter: what the caller decides, and the rest in its starting state. Every field is
 * written out in one literal, in the interface's order, so that every waiter has one hidden class:
 * a spread of `given` here made each acquire about twice as expensive in CPU (bench/ab.mjs).
 */
export function newWaiter(
  given: Pick<Waiter, 'keys' | 'member' | 'token' | 'ttl' | 'renew' | 'strategy' | 'started' | 'deadline' | 'state' | 'attempts' | 'resolve' | 'reject'>,
): Waiter {
  return {
    keys: given.keys,
    member: given.member,
    token: given.token,
    ttl: given.ttl,
    renew: given.renew,
    strategy: given.strategy,
    started: given.started,
    deadline: given.deadline,
    stop: undefined,
    state: given.state,
    attempts: given.attempts,
    lastSent: given.started,
    inFlight: false,
    granted: undefined,
    woken: false,
    joined: false,
    inboxJoined: false,
    jitter: false,
    wake: undefined,
    cancel: undefined,
    timer: undefined,
    resolve: given.resolve,
    reject: given.reject,
  };
}
