import type { LockKeys } from '../keys.js';
import type { QuorumOutcome } from './quorum.js';

/** What {@link Backend.inspect} found: the raw material of {@link LockInfo}, with the token for a forced release. */
export interface LockSnapshot {
  /** The holder's token (never shown), or null when the lock is free. */
  readonly token: string | null;
  /** Remaining time to live, ms; -1 when the key has no expiry (not set by latchkey); 0 when free. */
  readonly ttl: number;
  /** The last fence issued for the lock, when still known. */
  readonly fence: number | null;
  /** Entries in the lock's wait queue. */
  readonly queued: number;
  /**
   * When the current lease was taken, ms since the epoch by the store's clock, where the store can
   * tell (its fence is the server's clock in µs then, or it noted the time); null when free or
   * unknown (Redlock: a fence there can be a node's counter plus one).
   */
  readonly since: number | null;
}

/** Who holds a lock: the description its manager registered (the `holder` option of createLocks). */
export interface HolderInfo {
  /** The holder's description: by default `<hostname> pid <pid>`. */
  readonly who: string;
  /** When its lease was taken, ms since the epoch (the store's clock), when known; null otherwise. */
  readonly since: number | null;
}

/** What one acquire attempt found. */
export type AcquireReply =
  | {
      readonly acquired: true;
      readonly fence: number;
      /** With replica acknowledgement: whether the asked number of replicas acknowledged the acquire. */
      readonly replicated?: boolean;
    }
  /** `ttl`: the holder's remaining time to live in ms, or -1 when unknown (a key with no expiry). */
  | {
      readonly acquired: false;
      readonly ttl: number;
      /** Redlock: how the nodes voted. */
      readonly outcome?: QuorumOutcome;
      /** Redlock, after a split vote: wait this long (ms, random) before trying again, whatever wakes the waiter. */
      readonly retryAfter?: number;
      /**
       * The tag of the manager whose lease holds the lock (the first 8 hex digits of its token:
       * `holderTag` in token.ts), when the token has one. Over Redlock, only a tag that a majority
       * of the nodes name.
       */
      readonly holderTag?: string;
    };

/** What one attempt at several locks found: all taken (a fence per key, in order), or the first busy one. */
export type MultiAcquireReply =
  | { readonly acquired: true; readonly fences: readonly number[] }
  /** `busy`: the index (0-based) of the first busy key; `ttl`: its holder's remaining TTL, ms (-1: no expiry). */
  | { readonly acquired: false; readonly busy: number; readonly ttl: number };

/** What an extend found: done, the key gone, or the key held by another token. */
export type OwnershipReply = 'ok' | 'gone' | 'taken';

/** One lease in a batch of renewals ({@link Backend.extendMany}): its lock, its token, its new TTL (ms). */
export interface ExtendItem {
  readonly keys: LockKeys;
  readonly token: string;
  readonly ttl: number;
}

/**
 * What a batch of renewals found, one entry per lease in order: its {@link OwnershipReply}, or an
 * Error for that lease alone (its key holds a value of another type) while the others were done.
 */
export type ExtendManyReply = readonly (OwnershipReply | Error)[];

/**
 * Given part of a batch's replies as soon as they come ({@link Backend.extendMany} on a Cluster
 * client: one slot's): `indices` into the batch, and their replies in that order.
 */
export type ExtendManyPart = (indices: readonly number[], replies: ExtendManyReply) => void;

/** What a release found: released (freed, or granted to a queued waiter of another manager), handed off, or not held. */
export type ReleaseReply = 'ok' | 'gone' | 'taken' | { readonly handedOff: number };

/** A waiter that queues in the backend while it waits, and is told through its manager's inbox when a release grants it the lock. */
export interface QueueEntry {
  /** `<managerId>:<waiterId>`: the manager's inbox, and the waiter in it. */
  readonly member: string;
  /** How long the entry lives without another attempt, ms. */
  readonly entryTtl: number;
}

/** A waiter queued for a lock, asleep, whose queue entry a {@link Backend.keepQueued} call refreshes. */
export interface KeptEntry {
  readonly keys: LockKeys;
  /** Its name in the lock's wait queue (`<managerId>:<waiterId>`). */
  readonly member: string;
}

/**
 * What {@link Backend.keepQueued} found for one waiter: its entry refreshed and its lock held with
 * this remaining TTL in ms (a number above 0, or -1: no expiry); its entry refreshed and the lock
 * `free`; its entry `gone` (dropped, expired, passed over, or taken out by a release that granted
 * it the lock): it must attempt (to rejoin, or to take its lease); `told`: gone, and a wake-up
 * was sent to its inbox after the message of any grant that took its entry out (one Redis): the
 * inbox wakes it, holding that grant if there was one, so it takes the lock without an attempt;
 * `unknown`: the call that carried it failed (on a Cluster, one slot's call among several): it
 * must attempt.
 */
export type KeepReply = number | 'free' | 'gone' | 'told' | 'unknown';

/** Hand the lock to a waiter in the releasing process, in the release's own round trip. */
export interface HandOff {
  readonly token: string;
  readonly ttl: number;
  /** Grant to a queued waiter of another manager instead, if there is a live one. */
  readonly passOn: boolean;
}

/** A value stored with `locks.fencedWrite`. */
export interface FencedValue {
  readonly value: string;
  readonly fence: number;
}

/** What a fenced write found. */
export interface FencedWriteReply {
  readonly accepted: boolean;
  /** The highest fence the resource has accepted, after this write. */
  readonly highest: number;
}

/**
 * Where locks live. Each primitive is written once against this interface; a topology (one Redis,
 * the in-memory store, later Redlock and Cluster) is a backend. Methods reject with a
 * `BackendError` when the store fails, never with the driver's raw error.
 */
export interface Backend {
  /** Human-readable name for messages: `redis (ioredis)`, `memory`. */
  readonly name: string;
  /** The server as `host:port`, when known (one Redis), for messages about a server that does not answer. */
  readonly server?: string | undefined;
  /** The last connection error the client reported and has not recovered from, if any (the cause of an UnreachableError). */
  lastError?(): Error | undefined;
  /**
   * Whether a release can pass the lock on by itself: hand it to a waiter of the releasing
   * process, or grant it to a queued waiter. False for Redlock, where one node cannot decide
   * for a majority: its releases only wake the next waiter, which then asks the quorum.
   */
  readonly handsOff: boolean;
  /**
   * True when every call ends by itself in bounded time even if a server never answers (Redlock:
   * its per-node timeout). Otherwise the manager ends an acquire attempt at its waiter's deadline.
   */
  readonly boundsCalls?: boolean;
  /** Whether counting semaphores work here (keys with `semaphore` set). Not over Redlock. */
  readonly semaphores: boolean;
  /**
   * One attempt; when busy and `queue` is given, the waiter joins (or stays in) the lock's wait
   * queue. A busy reply names the holding manager's tag when there is one.
   */
  acquire(keys: LockKeys, token: string, ttl: number, queue?: QueueEntry): Promise<AcquireReply>;
  /**
   * Optional: one atomic attempt at several locks, all or none (nothing is written when any is
   * busy). Resolves to `undefined` when it cannot be done atomically here (a Cluster client): the
   * manager then takes them one by one in order.
   */
  acquireAll?(keys: readonly LockKeys[], token: string, ttl: number): Promise<MultiAcquireReply | undefined>;
  /** Releases, passing the lock on: to `handOff`'s token, else to the next live queued waiter (granted), else freed. */
  release(keys: LockKeys, token: string, handOff?: HandOff): Promise<ReleaseReply>;
  /**
   * Optional: the release of a lease whose caller expects nobody to wait for the lock (its manager
   * found it free and not contended lately). It frees the lock in the cheapest call when nobody
   * queued; when someone did, it calls `contended` and releases as {@link Backend.release} does
   * without a hand-off (one more round trip). Without it, the manager calls `release`.
   */
  releaseAlone?(keys: LockKeys, token: string, contended: () => void): Promise<OwnershipReply>;
  /** Sets a held lease's TTL again. */
  extend(keys: LockKeys, token: string, ttl: number): Promise<OwnershipReply>;
  /**
   * Optional: sets the TTL of several held leases of plain locks (no semaphore's) again, each only
   * if its key still holds its token, in as few calls as can be (the watchdog's batched renewals,
   * see Renewals). Resolves to one reply per item, in order; rejects when the backend could not be
   * reached (no item's outcome is known then). Resolves to `undefined` when it cannot batch here,
   * and the caller then extends each lease alone with {@link Backend.extend}.
   *
   * One Redis (redis-backend.ts): extend-many.lua, at most {@link MAX_BATCH} leases of one TTL a
   * call, the calls pipelined. A Cluster client: one such call per slot (a script's keys must
   * share one; see cluster-batches.ts). Undefined with replica acknowledgement (each extend
   * waits for its replicas). The memory
   * backend implements it; Redlock and compat mode do not. Where it is missing or undefined,
   * leases are extended one a call, still on the manager's one renewal timer.
   *
   * `onPart` (a Cluster client) is given each slot's replies as they come, before the batch
   * resolves: a master slower than a lease's validity then loses its own leases only, not those of
   * the masters that answered.
   */
  extendMany?(items: readonly ExtendItem[], onPart?: ExtendManyPart): Promise<ExtendManyReply | undefined>;
  /**
   * Optional (one Redis or a Cluster client): for waiters of one manager queued for locks (not
   * semaphores) and asleep, refreshes each one's queue entry for `entryTtl` ms, as an attempt that
   * found the lock busy would, and reports its lock's state; one script call (keep-queued.lua) per
   * batch, on a Cluster per slot of the batch. Never queues a waiter that is not queued. Resolves
   * to `undefined` when it cannot be done here: its waiters then re-check one by one.
   */
  keepQueued?(waiters: readonly KeptEntry[], entryTtl: number): Promise<readonly KeepReply[] | undefined>;
  /** Takes a waiter out of the wait queue; true when a release had granted it the lock (the caller must release it). */
  leave(keys: LockKeys, member: string, token: string): Promise<boolean>;
  fencedWrite(resource: string, value: string, fence: number): Promise<FencedWriteReply>;
  fencedRead(resource: string): Promise<FencedValue | null>;
  /**
   * Notes, under the registry key `key` (`holderRegistryKey` in keys.ts), who a manager is, for `ttl`
   * ms: its leases' tokens carry its tag, so every lock it holds names it, with nothing written
   * per lease. `ttl` 0 deletes the entry (a manager that closed with no lease left).
   */
  registerHolder(key: string, who: string, ttl: number): Promise<void>;
  /** Who registered under `key` ({@link Backend.registerHolder}), or null. */
  lookupHolder(key: string): Promise<string | null>;
  /** A consistent snapshot of one lock (read-only). */
  inspect(keys: LockKeys): Promise<LockSnapshot>;
  /** The names of the locks that exist under `prefix` whose name matches the glob `pattern`. */
  lockNames(prefix: string, pattern: string): Promise<string[]>;
  /**
   * Optional (one Redis): before a forced release, notes for `ttl` ms that the lease with `token`
   * is being broken on purpose (mark-forced.lua), so that its holder can tell (see `wasForced`).
   */
  markForced?(keys: LockKeys, token: string, ttl: number): Promise<void>;
  /** Optional, with `markForced`: whether the lease with `token` was broken by a forced release whose note still lives. */
  wasForced?(keys: LockKeys, token: string): Promise<boolean>;
  /**
   * Opens a manager's inbox: `listener(member, fence)` is called when a release granted the lock
   * to one of its waiters (fence 0: only woke it), and `listener(undefined)` after a reconnect
   * (messages may have been lost). Resolves once the connection is up.
   */
  watchInbox(managerId: string, listener: (member?: string, fence?: number) => void): Promise<Inbox>;
  /** Frees what the backend owns (subscriber connections, a client made from a URL). */
  close(): Promise<void>;
}

/**
 * A manager's inbox. On one Redis and in memory it is one channel per manager, listening from
 * the start; on Redis Cluster it is one sharded channel per lock (in the lock's slot, so that
 * the release script can publish to it and count its listeners), joined while the manager has a
 * waiter queued for that lock.
 */
export interface Inbox {
  /** True when a grant for this lock would reach the listener now. */
  listening(keys: LockKeys): boolean;
  /** Starts hearing grants for this lock (counted: as many leaves as joins); resolves once listening. */
  join(keys: LockKeys): Promise<void>;
  leave(keys: LockKeys): void;
  close(): Promise<void>;
  /** Optional: true once its connection ended for good (it will not reconnect): a new inbox is opened at the next join. */
  ended?(): boolean;
}

/**
 * An inbox that hears every lock from the start (one channel per manager), until `ended()` says
 * its connection ended for good.
 */
export function managerInbox(close: () => Promise<void>, ended: () => boolean = () => false): Inbox {
  return { listening: () => !ended(), join: () => Promise.resolve(), leave: () => {}, close, ended };
}

/**
 * The most leases one extend-many.lua call renews, so that one call never blocks the server long:
 * 500 took 0.8 ms of Redis 7.0's time in a loop, 1.6 to 2.9 ms amid other work (EVALSHA's
 * `usec_per_call`, on a shared 2-core machine): about 2 to 6 µs a lease, against 12 µs for one
 * extend.lua call.
 */
export const MAX_BATCH = 500;

/** How long a fence counter outlives the lease (ms). After that, the server clock alone keeps fences increasing. */
export const FENCE_RETENTION = 24 * 60 * 60 * 1000;

/**
 * Parses an inbox message, `"<member> <fence>"`: the fence in decimal digits (`0` for a wake-up),
 * as release.lua writes it. Read digit by digit, with no string made for it: the waiting process
 * parses it the moment it wakes, when each step costs several times what it does in a hot loop
 * (`node bench/trace-handoff.mjs`).
 */
export function parseGrant(message: string): { member: string; fence: number } | undefined {
  const space = message.lastIndexOf(' ');
  const end = message.length;
  // More than 16 digits cannot be a safe integer (2^53 has 16).
  if (space <= 0 || space === end - 1 || end - space > 17) return undefined;
  let fence = 0;
  for (let i = space + 1; i < end; i++) {
    const digit = message.charCodeAt(i) - 48;
    if (digit < 0 || digit > 9) return undefined;
    fence = fence * 10 + digit;
  }
  return Number.isSafeInteger(fence) ? { member: message.slice(0, space), fence } : undefined;
}
