import type { MemoryStore } from './backend/memory-store.js';
import type { RenewOptions } from './lease/watchdog.js';
import type { ObservabilityOptions } from './observe/types.js';
import type { WaitStrategyName } from './wait/strategy.js';

/**
 * An ioredis (5 or 6) or iovalkey `Redis` or `Cluster`, as latchkey recognises it (structurally:
 * no import of the package). The client types here only say which methods a client has.
 */
export interface IoredisClientLike {
  evalsha: (...args: never[]) => unknown;
  defineCommand: (...args: never[]) => unknown;
  duplicate: (...args: never[]) => unknown;
}

/** A node-redis (5 or 6) client or cluster, as latchkey recognises it (structurally). */
export interface NodeRedisClientLike {
  evalSha: (...args: never[]) => unknown;
  sendCommand: (...args: never[]) => unknown;
  duplicate: (...args: never[]) => unknown;
}

/** A Valkey GLIDE `GlideClient` or `GlideClusterClient`, as latchkey recognises it (structurally). */
export interface GlideClientLike {
  customCommand: (...args: never[]) => unknown;
  invokeScript: (...args: never[]) => unknown;
  close: (...args: never[]) => unknown;
}

/** A Redis client latchkey can borrow: a URL string is not one (use the `url` option). */
export type RedisClientLike = IoredisClientLike | NodeRedisClientLike | GlideClientLike;

/** Where the locks live: exactly one of `redis`, `url`, `redlock` or `memory`; none means a private in-memory store. */
export interface BackendOptions {
  /**
   * A client you already have: an ioredis `Redis` or `Cluster` (5 or 6, either protocol; or an
   * iovalkey one, its Valkey fork), a node-redis client (5 or 6, RESP2 or RESP3, connected), or a
   * Valkey GLIDE `GlideClient` or `GlideClusterClient`.
   * latchkey borrows it: it sends scripts through it and never modifies or closes it. For waiting
   * it makes one subscriber connection with the client's own `duplicate()` (same TLS and ACL user);
   * for GLIDE, which has none, a client of the same class created from the client's configuration with
   * latchkey's own pub/sub callback, closed by `locks.close()`. A URL goes in `url`, not here.
   */
  readonly redis?: RedisClientLike;
  /** A Redis URL (`redis://user:pass@host:6379/0`, `rediss://` for TLS). latchkey connects with the ioredis package installed beside it (else node-redis, `redis`) and closes the connection in `close()`. */
  readonly url?: string;
  /**
   * Redlock over independent Redis masters (not replicas of each other): clients (ioredis or
   * node-redis, borrowed) or URLs (latchkey connects and closes them), one per master; an odd
   * number, usually 3 or 5. Every operation needs a majority of them. See docs/safety.md.
   */
  readonly redlock?: readonly (RedisClientLike | string)[];
  /**
   * Single Redis with replicas: run `WAIT replicas timeout` right behind every acquire (pipelined
   * on the same connection) so that a lease is only handed out once `replicas` replicas have
   * the key. `shortfall: 'fail'` (default) releases the lock and rejects with a
   * `ReplicationError` when fewer acknowledge in `timeout` ms (default 100); `'accept'` hands out
   * the lease with `lease.replicated === false`. Turns off grants and hand-offs (every lease goes
   * through an acknowledged acquire). WAIT does not make Redis strongly consistent: see
   * docs/safety.md.
   */
  readonly replication?: { readonly replicas: number; readonly timeout?: number; readonly shortfall?: 'fail' | 'accept' };
  /** Redlock: longest wait for one node's reply, ms. Default: a tenth of the lease's TTL, between 10 and 100 ms. */
  readonly nodeTimeout?: number;
  /** An in-memory store to share between managers in one process (from `createMemoryStore()`). */
  readonly memory?: MemoryStore;
  /**
   * Migration only: share lock keys with services still running the timestamp lock of the old
   * articles (`SETNX key <expiry>`, `GET` then `GETSET` to take over an expired lock, `DEL` to
   * release). The lock key is then `prefix + name` exactly (the prefix defaults to `""`, so the
   * name is the legacy key) and holds what those services expect: the lease's expiry as a Unix
   * timestamp in milliseconds (`"timestamp"`) or seconds (`"timestamp-seconds"`). Only with
   * `redis` or `url` (one Redis, not Cluster). Needs synchronised clocks: see docs/safety.md.
   */
  readonly compat?: 'timestamp' | 'timestamp-seconds';
}

/**
 * Options of {@link createLocks}. Every per-call option set here is the default for calls. The
 * observability options (`logger`, `hooks`, `meterProvider`, `tracerProvider`, `keyGroup`) are
 * described in {@link ObservabilityOptions}.
 */
export interface LocksOptions extends BackendOptions, ObservabilityOptions {
  /** Prefix of every key latchkey writes. Default `"latchkey:"` (`""` with `compat`). May not contain `{` or `}`. */
  readonly prefix?: string;
  /** Default lease TTL in ms. Default 10000. */
  readonly ttl?: number;
  /** Default longest wait of `acquire` in ms (`Infinity` to wait until acquired or aborted). Default 10000. */
  readonly wait?: number;
  /** Default waiting strategy. Default `"notify"`. */
  readonly strategy?: WaitStrategyName;
  /**
   * notify: longest sleep between attempts without a release message, ms. Default 1000 (100 with
   * `compat`: legacy releases announce nothing). On one Redis and on Redis Cluster, lock waiters
   * queued in Redis make no attempt of their own at each recheck: the manager's queue keeper
   * refreshes all their queue entries and reads their locks' state in one call per 500 waiters
   * (on Cluster, per slot) every `recheck` ms, and wakes those whose lock is free or whose entry
   * is gone (see QueueKeeper). Semaphores (fair and read-write locks), Redlock, compat mode and the
   * in-memory store re-check per waiter.
   */
  readonly recheck?: number;
  /** Clock-drift allowance as a fraction of the TTL (plus 2 ms). Default 0.01. */
  readonly driftFactor?: number;
  /**
   * How many times in a row a released lock may be handed straight to another caller of this
   * manager waiting for it, before it goes to a waiter of another process. 0 turns hand-off off.
   * Default 8.
   */
  readonly localHandoffs?: number;
  /**
   * Who this manager says it is, for {@link Locks.inspect}, {@link Locks.list}, `latchkey status`
   * and `latchkey list`, and the `holder` of a waiter's `LockTimeoutError` (and its message).
   * Default (`true`): `<hostname> pid <pid>`; a string replaces it (at most 200 characters, e.g.
   * `` `billing on ${hostname()} pid ${process.pid}` ``; no secrets: anyone who can read the keys,
   * or see another process's errors and logs, sees it); `false` records nothing. Nothing is written
   * per lease: every token of the manager starts with its tag, and the manager registers its
   * description under that tag once (`<prefix>holder:<tag>`, again at most hourly while it takes
   * or renews leases, for a day).
   */
  readonly holder?: boolean | string;
  /**
   * Reentrant locks: code running inside `withLock(key, fn)` of this manager (in the same async
   * context: `fn` and what it awaits or starts, tracked with `AsyncLocalStorage`) may `acquire`,
   * `tryAcquire` or `withLock` the same key again without waiting: it gets a reentrant handle on
   * the lease the scope holds, and the lease's `holds` count goes up by one until the handle is
   * released. The lock is released when the outermost `withLock` ends. Callers in other async
   * contexts (another request) still wait. `withLocks` opens such a scope for each key it takes,
   * and a multi-lock inside a scope joins the keys the scope holds. A read-write lock's `withRead`
   * and `withWrite` open a read or write scope: reads join either, writes join a write scope, and
   * a write inside a read scope is refused (`UpgradeDeadlockError`). Default `false`: a nested
   * acquire of a held key waits like any other (and times out). Per call, the option `reentrant`
   * overrides this.
   */
  readonly reentrant?: boolean;
}

/** Options of `acquire` and `tryAcquire`. */
export interface AcquireOptions {
  /** Lease time to live in ms (10 to 2147483647). Default: the manager's (10000). */
  readonly ttl?: number;
  /** Longest time to wait for the lock, in ms; 0 tries once. Default: the manager's (10000). Ignored by `tryAcquire`. */
  readonly wait?: number;
  /** Abort the wait: `acquire` then rejects with `signal.reason`. */
  readonly signal?: AbortSignal;
  /** How to wait; default the manager's (`"notify"`). */
  readonly strategy?: WaitStrategyName;
  /**
   * Keep the lease alive with a watchdog that extends it every third of its TTL until it is
   * released. `true` or options; default `false` for `acquire`, `true` for `withLock`.
   */
  readonly renew?: boolean | RenewOptions;
  /**
   * Reentrancy for this call (default: the manager's `reentrant`). Inside a reentrant scope of
   * the same key and manager (a `withLock`, a key of `withLocks`), the call joins the scope's
   * lease instead of waiting (a multi-lock joins each key a scope holds): `ttl` must then be the
   * lease's own (or left out), `renew` may only be asked for when the lease is renewed already,
   * and `wait` and `strategy` do not apply. Defaults (the manager's `ttl`, the renewal of the
   * `with…` calls) are not requests. A reentrant `withLock` or `withLocks` outside such a scope
   * opens one. Read-write locks take it too (see {@link LocksOptions.reentrant}).
   */
  readonly reentrant?: boolean;
}

export const ACQUIRE_OPTIONS = ['ttl', 'wait', 'signal', 'strategy', 'renew', 'reentrant'] as const;
export const LOCKS_OPTIONS = ['redis', 'url', 'redlock', 'nodeTimeout', 'replication', 'memory', 'compat', 'prefix', 'ttl', 'wait', 'strategy', 'recheck', 'driftFactor', 'localHandoffs', 'holder', 'reentrant', 'logger', 'hooks', 'meterProvider', 'tracerProvider', 'keyGroup'] as const;

/** Options of {@link Locks.close}. */
export interface CloseOptions {
  /**
   * Release the leases the manager holds (default `true`). `false` leaves each to expire at its
   * TTL instead (see `Lease.letExpire`): the locks stay taken until then.
   */
  readonly release?: boolean;
}

export const CLOSE_OPTIONS = ['release'] as const;
