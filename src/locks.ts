import { AsyncLocalStorage } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { AcquireReply, Backend, FencedValue, Inbox, OwnershipReply } from './backend/backend.js';
import { createMemoryStore, memoryBackend, MemoryStore } from './backend/memory-store.js';
import { redisBackend, type Replication } from './backend/redis-backend.js';
import type { EvictionPolicyReport } from './backend/eviction-policy.js';
import { compatBackend } from './backend/compat-backend.js';
import { Deadlines, type Deadline } from './deadlines.js';
import { redlockBackend } from './backend/redlock-backend.js';
import { adaptClient, addressOf, connectUrl } from './client/detect.js';
import type { ScriptClient } from './client/script-client.js';
import { now, validUntil } from './clock.js';
import {
  BackendError,
  ClosedError,
  InvalidOptionError,
  LockAbortedError,
  LockSuppressedError,
  LockTimeoutError,
  QuorumError,
  StaleFenceError,
  UnsupportedError,
} from './errors.js';
import { undecided, type QuorumOutcome } from './backend/quorum.js';
import { DEFAULT_PREFIX, KeysCache, semaphoreKeys, type LockKeys, type SemaphoreKind } from './keys.js';
import { Lease, type LeaseContext } from './lease/lease.js';
import { lockInfo, type LockInfo } from './lock-info.js';
import { MAX_PERMITS, SEMAPHORE_OPTIONS, type PermitOptions, type Semaphore, type SemaphoreOptions } from './semaphore.js';
import { READ_WRITE_LOCK_OPTIONS, type ReadWriteLock, type ReadWriteLockOptions } from './read-write-lock.js';
import { FAIR_LOCK_OPTIONS, type FairLock, type FairLockOptions } from './fair-lock.js';
import { MultiLease } from './multi-lease.js';
import type { RenewOptions } from './lease/watchdog.js';
import { ACQUIRE_OPTIONS, LOCKS_OPTIONS, type AcquireOptions, type LocksOptions } from './options.js';

const PERMIT_OPTIONS = [...ACQUIRE_OPTIONS.filter((option) => option !== 'reentrant'), 'permits'] as const;
import { TokenSource } from './token.js';
import { createObserver, type AcquireTrace, type Observer } from './observe/observer.js';
import type { LockKind } from './observe/types.js';
import { sleep } from './wait/sleep.js';
import { checkStrategy, DEFAULT_TUNING, nextDelay, type WaitStrategyName, type WaitTuning } from './wait/strategy.js';
import { newWaiter, type KeyState, type Waiter } from './wait/waiter.js';
import {
  checkFence,
  checkFraction,
  checkKey,
  checkOptions,
  checkPrefix,
  checkSignal,
  checkTtl,
  checkWait,
} from './validate.js';

/** The lock manager returned by {@link createLocks}. */
export interface Locks {
  /** Which backend the manager runs on: `redis (ioredis)`, `redis (node-redis)`, `redis`, `memory`. */
  readonly backend: string;
  /**
   * Acquires the lock `key`, waiting up to `wait` ms. Rejects with {@link LockTimeoutError} when
   * the wait runs out, with `signal.reason` when aborted, with `BackendError` when Redis fails.
   * Waiters of one manager for one key are served first come, first served. With `reentrant`,
   * inside a `withLock` scope of this manager that holds `key` (same async context), resolves at
   * once to a reentrant handle on the scope's lease (see {@link LocksOptions.reentrant}).
   */
  acquire(key: string, options?: AcquireOptions): Promise<Lease>;
  /**
   * Tries once: resolves to a lease, or `null` when the lock is held (or when callers of this
   * manager are already waiting for it: tryAcquire does not jump their queue). With `reentrant`,
   * inside a scope that holds `key`, resolves to a reentrant handle, as `acquire` does.
   */
  tryAcquire(key: string, options?: Omit<AcquireOptions, 'wait'>): Promise<Lease | null>;
  /**
   * Runs `fn` while holding `key`, renewing the lease by default, and releases it when `fn`
   * returns or throws. Rejects with `LeaseLostError` when the lease was lost before the release,
   * even if `fn` succeeded: its work was not fully protected.
   *
   * With `reentrant` (manager or call option), `fn` runs in a scope (an `AsyncLocalStorage`
   * context of this manager) that records the lease: a reentrant `acquire`, `tryAcquire` or
   * `withLock` of `key` made inside it joins that lease (`lease.holds` counts the holds) instead of
   * waiting, and the lock is released when the outermost scope ends. Callers in other async
   * contexts still wait.
   *
   * @example
   * ```ts
   * const locks = createLocks({ redis, reentrant: true });
   * await locks.withLock('account:7', async (outer) => {
   *   await locks.withLock('account:7', async (inner) => {
   *     inner.holds; // 2: the same lock (inner.fence === outer.fence), not released by this scope's end
   *   });
   * }); // released here
   * ```
   */
  withLock<T>(key: string, fn: (lease: Lease) => Promise<T> | T): Promise<T>;
  withLock<T>(key: string, options: AcquireOptions, fn: (lease: Lease) => Promise<T> | T): Promise<T>;
  /**
   * Acquires every lock of `keys`, all or nothing, waiting up to `wait` ms in all. The keys are
   * taken in one fixed global order (sorted by code unit), so callers with overlapping sets never
   * deadlock; on one Redis (not Cluster, not with `replication`) a first attempt takes them all
   * in one script when all are free. When a key cannot be had (timeout, abort, error) the keys
   * already taken are released before the call rejects, as {@link Locks.acquire} would. `keys`
   * must be a non-empty array of distinct names.
   */
  acquireAll(keys: readonly string[], options?: AcquireOptions): Promise<MultiLease>;
  /**
   * Tries once to take every lock of `keys`: resolves to a multi-lease, or `null` when any of
   * them is held (or waited for by callers of this manager). Never leaves some of them held.
   */
  tryAcquireAll(keys: readonly string[], options?: Omit<AcquireOptions, 'wait'>): Promise<MultiLease | null>;
  /**
   * Runs `fn` while holding every lock of `keys` (renewed by default), and releases them all when
   * it returns or throws; rejects with `LeaseLostError` when any part was lost before the release.
   */
  withLocks<T>(keys: readonly string[], fn: (lease: MultiLease) => Promise<T> | T): Promise<T>;
  withLocks<T>(keys: readonly string[], options: AcquireOptions, fn: (lease: MultiLease) => Promise<T> | T): Promise<T>;
  /**
   * Writes `value` to the resource key `resource` only if `fence` (a number, or a lease's fence) is
   * at least the highest fence the resource has accepted; rejects with {@link StaleFenceError}
   * otherwise. The resource is stored as a hash `{ value, fence }` under your own key (no prefix).
   */
  fencedWrite(resource: string, value: string, fence: number | Lease): Promise<void>;
  /** Reads a resource written by {@link Locks.fencedWrite}; `null` if never written. */
  fencedRead(resource: string): Promise<FencedValue | null>;
  /** A snapshot of the lock `key`: held or not, TTL left, last fence, queued waiters, and its holder if recorded. */
  inspect(key: string): Promise<LockInfo>;
  /**
   * The locks held now under this manager's prefix whose name matches the Redis glob `pattern`
   * (default `*`), sorted by name. Uses SCAN (on Redis Cluster, on every master): fine for
   * operators and dashboards, not for a hot path.
   */
  list(pattern?: string): Promise<LockInfo[]>;
  /**
   * An operator's escape hatch: ends whichever lease holds `key` and passes the lock on to the
   * next waiter, as its holder's release would. The holder is not told; its next renewal fails,
   * so a watchdog-renewed lease reports the loss through its signal. Resolves to what was broken
   * (its holder, if recorded), or `null` when the lock was free.
   */
  forceRelease(key: string): Promise<LockInfo | null>;
  /**
   * A counting semaphore named `name` with `limit` permits, shared with every manager on the
   * same backend and prefix. Each permit is a lease (TTL, fence, watchdog). Not over Redlock
   * ({@link UnsupportedError}).
   */
  semaphore(name: string, options: SemaphoreOptions): Semaphore;
  /**
   * A read-write lock named `name`: many readers at once, or one writer. Waiters are served first
   * come, first served across processes, so a waiting writer holds back the readers that come
   * after it (a stream of readers cannot starve it), and the readers queued behind a writer go in
   * together when it releases. Each read or write is a Lease. Not over Redlock.
   */
  readWriteLock(name: string, options?: ReadWriteLockOptions): ReadWriteLock;
  /**
   * A fair lock named `name`: one holder at a time, served strictly first come, first served
   * across processes (no barging, no in-process hand-off). A waiter keeps its place by
   * re-checking at least every `recheck` ms; one that died is passed over at the next release
   * (its inbox has no listener), and otherwise drops out within 3 × `recheck` ms of its last
   * check. Not over Redlock.
   */
  fairLock(name: string, options?: FairLockOptions): FairLock;
  /**
   * Stops waits in progress (they reject with a `LockAbortedError`), releases the leases this
   * manager holds, and closes the connections latchkey made. A borrowed client stays open.
   */
  close(): Promise<void>;
}

interface Settings {
  readonly prefix: string;
  readonly ttl: number;
  readonly wait: number;
  readonly strategy: WaitStrategyName;
  readonly driftFactor: number;
  readonly tuning: WaitTuning;
  readonly localHandoffs: number;
  /** What to record as the holder of each lease, if anything. */
  readonly holder: string | undefined;
  /** Whether calls are reentrant by default (see {@link LocksOptions.reentrant}). */
  readonly reentrant: boolean;
}

/** A reentrant `withLock` scope: the lease it holds, while its callback runs. */
interface Scope {
  readonly lease: Lease;
  /** Whether the lease has a watchdog. */
  readonly renewed: boolean;
  /** Until the callback ends: code it started that runs later (a timer, a detached promise) is no longer inside. */
  open: boolean;
}

/** The reentrant scopes of one manager in an async context, by lock name. */
type Scopes = ReadonlyMap<string, Scope>;

/**
 * Creates a lock manager.
 *
 * @example
 * ```ts
 * import { Redis } from 'ioredis';
 * import { createLocks } from 'latchkey';
 * const locks = createLocks({ redis: new Redis() });
 * await locks.withLock('orders:42', async (lease) => {
 *   await chargeOrder(42, { fence: lease.fence, signal: lease.signal });
 * });
 * ```
 */
export function createLocks(options?: LocksOptions): Locks {
  const o = checkOptions<LocksOptions>(options, LOCKS_OPTIONS, 'options');
  const settings: Settings = {
    // In compat mode the lock key is `prefix + name` as the legacy services spell it: no prefix by default.
    prefix: o.prefix === undefined ? (o.compat === undefined ? DEFAULT_PREFIX : '') : checkPrefix(o.prefix),
    ttl: o.ttl === undefined ? 10_000 : checkTtl(o.ttl),
    wait: o.wait === undefined ? 10_000 : checkWait(o.wait),
    strategy: o.strategy === undefined ? 'notify' : checkStrategy(o.strategy),
    driftFactor: o.driftFactor === undefined ? 0.01 : checkFraction(o.driftFactor, 'driftFactor', 0.5),
    tuning: {
      ...DEFAULT_TUNING,
      // Legacy clients release with a bare DEL that wakes nobody: compat waiters look more often.
      ...(o.compat === undefined ? {} : { recheck: COMPAT_RECHECK }),
      ...(o.recheck === undefined ? {} : { recheck: checkCount(o.recheck, 'recheck', 1) }),
    },
    localHandoffs: o.localHandoffs === undefined ? 8 : checkCount(o.localHandoffs, 'localHandoffs', 0),
    holder: checkHolder(o.holder),
    reentrant: o.reentrant === undefined ? false : checkBoolean(o.reentrant, 'reentrant'),
  };
  // The eviction-policy check runs only when someone would hear its warning; its reply comes
  // after createLocks returns, so `late.observer` is set by then.
  const late: { observer?: Observer | undefined } = {};
  const hooks = o.hooks as { evictionPolicy?: unknown } | undefined;
  const onEviction: EvictionWarning | undefined =
    o.logger !== undefined || hooks?.evictionPolicy !== undefined ? (report, node) => late.observer?.evictionPolicy(report, node) : undefined;
  const backend = chooseBackend(o, settings.prefix, onEviction);
  late.observer = createObserver(o, settings.prefix, backend.name);
  return new LockManager(backend, settings, late.observer);
}

function checkBoolean(value: unknown, option: string): boolean {
  if (typeof value !== 'boolean') throw new InvalidOptionError(option, 'true or false', value);
  return value;
}

function checkHolder(value: unknown): string | undefined {
  if (value === undefined || value === false) return undefined;
  if (value === true) return `${hostname()} pid ${process.pid}`;
  if (typeof value !== 'string' || value === '' || value.length > 200) {
    throw new InvalidOptionError('holder', 'true, false, or a description of at most 200 characters', value);
  }
  return value;
}

/** Connects to a URL given as option `option`; a failure is reported by the first call that needs the connection. */
function connectChecked(url: unknown, option: string): Promise<ScriptClient> {
  if (typeof url !== 'string' || !/^rediss?:\/\//.test(url)) {
    throw new InvalidOptionError(option, 'a redis:// or rediss:// URL', url);
  }
  const connecting = connectUrl(url);
  connecting.catch(() => {});
  return connecting;
}

function checkReplication(value: unknown): Replication {
  const o = checkOptions<{ replicas: number; timeout?: number; shortfall?: 'fail' | 'accept' }>(
    value,
    ['replicas', 'timeout', 'shortfall'],
    'replication',
  );
  const replicas = checkCount(o.replicas, 'replication.replicas', 1, 'a positive integer number of replicas');
  const timeout = o.timeout === undefined ? 100 : checkCount(o.timeout, 'replication.timeout', 1);
  if (o.shortfall !== undefined && o.shortfall !== 'fail' && o.shortfall !== 'accept') {
    throw new InvalidOptionError('replication.shortfall', '"fail" or "accept"', o.shortfall);
  }
  return { replicas, timeout, shortfall: o.shortfall ?? 'fail' };
}

function checkRedlockNodes(value: unknown): readonly unknown[] {
  if (!Array.isArray(value) || value.length === 0) {
    throw new InvalidOptionError('redlock', 'a non-empty array of clients or URLs, one per independent master', value);
  }
  // The same master twice would count its vote twice.
  const seen = new Set<unknown>();
  value.forEach((node: unknown, i) => {
    const identity = typeof node === 'string' ? addressOf(node) ?? node : node;
    if (seen.has(identity)) {
      throw new InvalidOptionError(`redlock[${i}]`, 'a master not already in the list (a repeated node would vote twice)', node);
    }
    seen.add(identity);
  });
  return value;
}

function checkCount(value: unknown, option: string, min: number, expected?: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min) {
    throw new InvalidOptionError(option, expected ?? (min === 0 ? 'a non-negative integer' : 'a positive integer number of milliseconds'), value);
  }
  return value;
}

/** Reports a server's eviction policy (node: a Redlock node's label). */
type EvictionWarning = (report: EvictionPolicyReport, node?: string) => void;

function chooseBackend(o: Partial<LocksOptions>, prefix: string, onEviction?: EvictionWarning): Backend {
  const given = (['redis', 'url', 'redlock', 'memory'] as const).filter((name) => o[name] !== undefined);
  if (given.length > 1) {
    throw new InvalidOptionError(given.join(' and '), 'only one of "redis", "url", "redlock" or "memory"', `${given.length} of them`);
  }
  if (o.nodeTimeout !== undefined && o.redlock === undefined) {
    throw new InvalidOptionError('nodeTimeout', 'to be given only with "redlock"', o.nodeTimeout);
  }
  const replication = o.replication === undefined ? undefined : checkReplication(o.replication);
  if (o.compat !== undefined) return chooseCompatBackend(o, prefix);
  if (replication && o.redis === undefined && o.url === undefined) {
    throw new InvalidOptionError('replication', 'to be given only with "redis" or "url" (one primary with replicas)', o.replication);
  }
  if (o.redis !== undefined) return redisBackend(adaptClient(o.redis), prefix, { replication, onEvictionPolicy: onEviction });
  if (o.url !== undefined) return redisBackend(connectChecked(o.url, 'url'), prefix, { replication, onEvictionPolicy: onEviction });
  if (o.redlock !== undefined) {
    const nodes = checkRedlockNodes(o.redlock);
    const nodeTimeout = o.nodeTimeout === undefined ? undefined : checkCount(o.nodeTimeout, 'nodeTimeout', 1);
    return redlockBackend(
      nodes.map((node, i) => {
        const label = `node ${i}${addressOf(node) ? ` (${addressOf(node)})` : ''}`;
        const client = typeof node === 'string' ? connectChecked(node, `redlock[${i}]`) : adaptClient(node, `redlock[${i}]`);
        return redisBackend(client, prefix, { wake: true, label, onEvictionPolicy: onEviction && ((report) => onEviction(report, label)) });
      }),
      { nodeTimeout },
    );
  }
  if (o.memory !== undefined) {
    if (!(o.memory instanceof MemoryStore)) throw new InvalidOptionError('memory', 'a store from createMemoryStore()', o.memory);
    return memoryBackend(o.memory);
  }
  return memoryBackend(createMemoryStore());
}

/** The default `recheck` in compat mode, ms (see {@link LocksOptions.recheck}). */
const COMPAT_RECHECK = 100;

function chooseCompatBackend(o: Partial<LocksOptions>, prefix: string): Backend {
  const mode = o.compat;
  if (mode !== 'timestamp' && mode !== 'timestamp-seconds') {
    throw new InvalidOptionError('compat', '"timestamp" (an expiry in Unix milliseconds, as the legacy lock writes it) or "timestamp-seconds"', mode);
  }
  if (o.redis === undefined && o.url === undefined) {
    const other = o.redlock !== undefined ? 'redlock' : o.memory !== undefined ? 'memory' : 'the default in-memory store';
    throw new InvalidOptionError(
      'compat',
      `to be given only with "redis" or "url": the legacy services lock one key on one Redis, and ${other} is not where they look`,
      mode,
    );
  }
  if (o.replication !== undefined) {
    throw new InvalidOptionError('replication', 'not to be given with "compat" (compat mode runs no WAIT after its acquire)', o.replication);
  }
  if (o.url !== undefined) return compatBackend(connectChecked(o.url, 'url'), prefix, mode);
  const client = adaptClient(o.redis);
  if (client.cluster) {
    throw new InvalidOptionError(
      'compat',
      'a single Redis, not a Cluster client: the legacy lock key and latchkey\'s keys beside it are in different slots, so no script can check and take them atomically',
      mode,
    );
  }
  return compatBackend(client, prefix, mode);
}

class LockManager implements Locks {
  readonly #backend: Backend;
  readonly #settings: Settings;
  readonly #id = randomBytes(8).toString('hex');
  readonly #keys = new Map<string, KeyState>();
  /** Waiters talking to the backend, by their queue name, for inbox messages. */
  readonly #active = new Map<string, Waiter>();
  readonly #held = new Set<Lease>();
  /** Semaphore waiters talking to the backend (they do not queue in a KeyState: several may hold permits at once). */
  readonly #permitWaiters = new Set<Waiter>();
  readonly #leaseContext: LeaseContext;
  readonly #tokens = new TokenSource();
  readonly #lockKeys: KeysCache;
  #nextWaiter = 0;
  #inbox: Promise<Inbox> | undefined;
  /** The inbox once its connection is up: from then on no message to a lock it listens for is missed (but across a reconnect, which wakes everyone). */
  #inboxReady: Inbox | undefined;
  #closed = false;
  /** The reentrant scopes of the async context; made by the first reentrant call (none on the default path). */
  #scopes: AsyncLocalStorage<Scopes> | undefined;
  /** Metrics, spans, hooks and logs; undefined when nothing listens (every instrumentation point is then skipped). */
  readonly #observer: Observer | undefined;

  constructor(backend: Backend, settings: Settings, observer: Observer | undefined) {
    this.#backend = backend;
    this.#settings = settings;
    this.#lockKeys = new KeysCache(settings.prefix);
    this.#observer = observer;
    this.#leaseContext = {
      backend,
      driftFactor: settings.driftFactor,
      release: observer?.tracing
        ? (lease, keys, token) => observer.traceRelease(lease, () => this.#release(lease, keys, token))
        : (lease, keys, token) => this.#release(lease, keys, token),
      onEnd: (lease) => this.#leaseEnded(lease),
      onRenew: observer ? (lease, error) => observer.renewal(lease, error) : undefined,
    };
  }

  get backend(): string {
    return this.#backend.name;
  }

  acquire(key: string, options?: AcquireOptions): Promise<Lease> {
    const observer = this.#observer;
    if (!observer) return this.#acquire(key, options, false) as Promise<Lease>;
    const t = observer.start('lock', String(key));
    return observer.track(t, this.#acquire(key, options, false, t) as Promise<Lease>, options?.signal);
  }

  tryAcquire(key: string, options?: Omit<AcquireOptions, 'wait'>): Promise<Lease | null> {
    const observer = this.#observer;
    if (!observer) return this.#acquire(key, options, true);
    const t = observer.start('lock', String(key));
    return observer.track(t, this.#acquire(key, options, true, t), options?.signal);
  }

  async withLock<T>(
    key: string,
    optionsOrFn: AcquireOptions | ((lease: Lease) => Promise<T> | T),
    maybeFn?: (lease: Lease) => Promise<T> | T,
  ): Promise<T> {
    const fn = typeof optionsOrFn === 'function' ? optionsOrFn : maybeFn;
    const options = typeof optionsOrFn === 'function' ? undefined : optionsOrFn;
    if (typeof fn !== 'function') throw new InvalidOptionError('fn', 'a function to run while the lock is held', fn);
    if (!this.#reentrant(options)) return this.#runHolding(await this.acquire(key, { renew: true, ...options }), fn);
    // Reentrant: join the scope of this context that holds the key, or open one.
    this.#assertOpen();
    const name = checkKey(key);
    const scopes = (this.#scopes ??= new AsyncLocalStorage<Scopes>()).getStore();
    const joined = this.#join(scopes?.get(name), options);
    if (joined) return this.#runHolding(joined, fn);
    const renew = checkRenew(options?.renew ?? true);
    const lease = await this.acquire(name, { ...options, renew: renew ?? false, reentrant: false });
    const scope: Scope = { lease, renewed: renew !== undefined, open: true };
    const inner = new Map(scopes).set(name, scope);
    return this.#scopes.run(inner, () =>
      this.#runHolding(lease, async (held) => {
        try {
          return await fn(held);
        } finally {
          scope.open = false; // closed before the release: nothing joins a lease being released
        }
      }),
    );
  }

  /** Whether a call with `options` is reentrant (validated). */
  #reentrant(options: AcquireOptions | undefined): boolean {
    const asked = (options as { reentrant?: unknown } | undefined)?.reentrant;
    return asked === undefined ? this.#settings.reentrant : checkBoolean(asked, 'reentrant');
  }

  /**
   * A reentrant call's hold on the lease of `scope` when the scope is open and holds it; undefined
   * when there is none to join (the call then acquires as usual). A scope whose lease was lost
   * refuses with its LeaseLostError: the code inside is no longer protected.
   */
  #join(scope: Scope | undefined, options: AcquireOptions | undefined): Lease | undefined {
    if (!scope?.open) return undefined;
    const o = checkOptions<AcquireOptions>(options, ACQUIRE_OPTIONS, 'options');
    const { lease } = scope;
    if (o.ttl !== undefined && checkTtl(o.ttl) !== lease.ttl) {
      throw new InvalidOptionError('ttl', `the TTL of the lease this reentrant scope holds (${lease.ttl} ms), or none`, o.ttl);
    }
    if (o.wait !== undefined) checkWait(o.wait);
    if (o.strategy !== undefined) checkStrategy(o.strategy);
    if (checkRenew(o.renew) !== undefined && !scope.renewed) {
      throw new InvalidOptionError('renew', 'left out or false: the lease this reentrant scope holds has no watchdog (its outermost acquire decides)', o.renew);
    }
    checkSignal(o.signal)?.throwIfAborted();
    const state = lease.state;
    if (state === 'lost') throw lease.lostError;
    if (state !== 'held') return undefined; // released early by hand: the scope holds nothing
    return lease.enter();
  }

  acquireAll(keys: readonly string[], options?: AcquireOptions): Promise<MultiLease> {
    return this.#acquireAll(keys, options, false) as Promise<MultiLease>;
  }

  tryAcquireAll(keys: readonly string[], options?: Omit<AcquireOptions, 'wait'>): Promise<MultiLease | null> {
    return this.#acquireAll(keys, options, true);
  }

  async withLocks<T>(
    keys: readonly string[],
    optionsOrFn: AcquireOptions | ((lease: MultiLease) => Promise<T> | T),
    maybeFn?: (lease: MultiLease) => Promise<T> | T,
  ): Promise<T> {
    const fn = typeof optionsOrFn === 'function' ? optionsOrFn : maybeFn;
    const options = typeof optionsOrFn === 'function' ? undefined : optionsOrFn;
    if (typeof fn !== 'function') throw new InvalidOptionError('fn', 'a function to run while the locks are held', fn);
    return this.#runHolding(await this.acquireAll(keys, { renew: true, ...options }), fn);
  }

  /**
   * Takes every key of `names`, all or nothing. First, when the backend can and no caller of this
   * process holds or waits for any of them, one atomic attempt for all (#acquireAtOnce). Then the
   * ordered path: each key in the global order with the per-key machinery (local queues, the
   * backend's queue, notifications); on any failure the keys taken so far are released.
   */
  async #acquireAll(names: unknown, options: AcquireOptions | undefined, once: boolean): Promise<MultiLease | null> {
    this.#assertOpen();
    const sorted = checkKeySet(names);
    const o = checkOptions<AcquireOptions>(options, ACQUIRE_OPTIONS, 'options');
    const { ttl, wait, signal, strategy, renew } = this.#callSettings(o, once);
    signal?.throwIfAborted();
    const started = now();
    const deadline = started + wait;

    const atOnce = await this.#acquireAtOnce(sorted, ttl, renew);
    if (signal?.aborted) {
      await releaseAll(atOnce ?? []);
      throw signal.reason;
    }
    if (atOnce) return new MultiLease(atOnce, ttl);
    if (atOnce === null && once) return null;

    const part: AcquireOptions = { ttl, strategy, renew: renew ?? false, ...(signal ? { signal } : {}) };
    let attempts = 0;
    for (;;) {
      attempts++;
      const parts: Lease[] = [];
      try {
        for (const name of sorted) {
          const lease = once ? await this.tryAcquire(name, part) : await this.acquire(name, { ...part, wait: Math.max(0, Math.ceil(deadline - now())) });
          if (!lease) {
            await releaseAll(parts);
            return null;
          }
          parts.push(lease);
        }
      } catch (error) {
        await releaseAll(parts);
        throw error;
      }
      // Parts taken early may have run short while a later one was waited for: without a
      // watchdog, extend them so the whole has at least half its TTL. A part lost meanwhile
      // (expired, and maybe taken) means starting over.
      if (!renew && parts.length > 1 && Math.min(...parts.map((p) => p.timeLeft())) < ttl / 2) {
        try {
          await Promise.all(parts.slice(0, -1).map((p) => p.extend(ttl)));
        } catch {
          // lost: start over below
        }
      }
      if (parts.every((p) => p.held)) return new MultiLease(parts, ttl);
      await releaseAll(parts);
      if (once) return null;
      signal?.throwIfAborted();
      if (deadline - now() <= 0) throw new LockTimeoutError(sorted.join(', '), now() - started, attempts);
    }
  }

  /**
   * One atomic attempt at every key, when the backend can take several in one step
   * ({@link Backend.acquireAll}) and no caller of this process holds or waits for any of them
   * (it would jump their queue). The parts, `null` when a key was busy, `undefined` when not tried.
   */
  async #acquireAtOnce(names: readonly string[], ttl: number, renew: RenewOptions | undefined): Promise<Lease[] | null | undefined> {
    const acquireAll = this.#backend.acquireAll;
    if (!acquireAll) return undefined;
    const busyHere = (): boolean =>
      names.some((name) => {
        const state = this.#keys.get(name);
        state?.holder?.watchExpiry(); // ends it now if its validity already ran out
        return state !== undefined && (state.holder !== undefined || state.waiters.length > 0);
      });
    if (busyHere()) return undefined;
    const keys = names.map((name) => this.#lockKeys.get(name));
    const token = this.#tokens.next();
    const sentAt = now();
    let reply;
    try {
      reply = await acquireAll.call(this.#backend, keys, token, ttl);
    } catch (error) {
      // The reply may be what was lost: give back whatever it took.
      for (const k of keys) this.#backend.release(k, token).catch(() => {});
      throw error;
    }
    if (reply === undefined) return undefined;
    if (!reply.acquired) return null;
    if (validUntil(sentAt, ttl, this.#settings.driftFactor) <= now() || busyHere()) {
      // Too late to be of use, or another call of this process got in meanwhile: give them back.
      await Promise.all(keys.map((k) => this.#backend.release(k, token).catch(() => {})));
      return undefined;
    }
    const leases = keys.map((k, i) => this.#lease(this.#state(k.name), k, token, reply.fences[i]!, ttl, sentAt, renew));
    if (this.#observer) for (const lease of leases) this.#observer.acquiredTogether(lease, sentAt);
    return leases;
  }

  /** Runs `fn(lease)`, then releases the lease: its loss is reported even when `fn` succeeded. */
  async #runHolding<L extends Lease | MultiLease, T>(lease: L, fn: (lease: L) => Promise<T> | T): Promise<T> {
    let result: T;
    try {
      result = await fn(lease);
    } catch (error) {
      try {
        await lease.release();
      } catch (releaseError) {
        throw new LockSuppressedError(releaseError, error);
      }
      throw error;
    }
    await lease.release();
    return result;
  }

  async fencedWrite(resource: string, value: string, fence: number | Lease): Promise<void> {
    this.#assertOpen();
    checkKey(resource, 'resource');
    if (typeof value !== 'string') throw new InvalidOptionError('value', 'a string (serialise objects with JSON.stringify)', value);
    const f = checkFence(fence instanceof Lease ? fence.fence : fence);
    const reply = await this.#backend.fencedWrite(resource, value, f);
    if (!reply.accepted) throw new StaleFenceError(resource, f, reply.highest);
  }

  async fencedRead(resource: string): Promise<FencedValue | null> {
    this.#assertOpen();
    return this.#backend.fencedRead(checkKey(resource, 'resource'));
  }

  async inspect(key: string): Promise<LockInfo> {
    this.#assertOpen();
    const name = checkKey(key);
    return lockInfo(name, await this.#backend.inspect(this.#lockKeys.get(name)));
  }

  async list(pattern = '*'): Promise<LockInfo[]> {
    this.#assertOpen();
    if (typeof pattern !== 'string' || pattern === '') throw new InvalidOptionError('pattern', 'a non-empty Redis glob pattern, e.g. "orders:*"', pattern);
    const names = await this.#backend.lockNames(this.#settings.prefix, pattern);
    const infos = await Promise.all(names.map((name) => this.inspect(name)));
    return infos.filter((info) => info.held);
  }

  async forceRelease(key: string): Promise<LockInfo | null> {
    this.#assertOpen();
    const name = checkKey(key);
    const keys = this.#lockKeys.get(name);
    // The lease can change hands between the look and the release: look again, a few times.
    for (let attempt = 0; attempt < 5; attempt++) {
      const snapshot = await this.#backend.inspect(keys);
      if (snapshot.token === null) return null;
      const reply = await this.#backend.release(keys, snapshot.token);
      if (reply === 'ok') return lockInfo(name, snapshot);
    }
    throw new BackendError('forceRelease', `the lock "${name}" kept changing hands; try again`);
  }

  semaphore(name: string, options: SemaphoreOptions): Semaphore {
    this.#assertOpen();
    const semName = checkKey(name, 'name');
    const o = checkOptions<SemaphoreOptions>(options, SEMAPHORE_OPTIONS, 'options');
    const limit = checkCount(o.limit, 'limit', 1, 'a positive integer number of permits');
    if (limit > MAX_PERMITS) throw new InvalidOptionError('limit', `at most ${MAX_PERMITS} permits`, limit);
    return this.#permitsOf(semName, limit, 'sem', o);
  }

  readWriteLock(name: string, options?: ReadWriteLockOptions): ReadWriteLock {
    this.#assertOpen();
    const rwName = checkKey(name, 'name');
    const o = checkOptions<ReadWriteLockOptions>(options, READ_WRITE_LOCK_OPTIONS, 'options');
    // Readers take one permit, a writer all of them; the queue is first come, first served.
    const sem = this.#permitsOf(rwName, MAX_PERMITS, 'rw', o);
    const reader = (options: AcquireOptions | undefined): PermitOptions => ({ ...checkOptions<AcquireOptions>(options, ACQUIRE_OPTIONS, 'options'), permits: 1 });
    const writer = (options: AcquireOptions | undefined): PermitOptions => ({
      ...checkOptions<AcquireOptions>(options, ACQUIRE_OPTIONS, 'options'),
      permits: MAX_PERMITS,
    });
    const scoped = (as: (o: AcquireOptions | undefined) => PermitOptions) =>
      (<T>(optionsOrFn: AcquireOptions | ((lease: Lease) => Promise<T> | T), maybeFn?: (lease: Lease) => Promise<T> | T): Promise<T> => {
        const fn = typeof optionsOrFn === 'function' ? optionsOrFn : maybeFn;
        const given = typeof optionsOrFn === 'function' ? undefined : optionsOrFn;
        if (typeof fn !== 'function') return Promise.reject(new InvalidOptionError('fn', 'a function to run while the lock is held', fn));
        return sem.withPermit(as(given), fn);
      }) as ReadWriteLock['withRead'];
    return {
      name: rwName,
      read: (options) => sem.acquire(reader(options)),
      tryRead: (options) => sem.tryAcquire(reader(options)),
      write: (options) => sem.acquire(writer(options)),
      tryWrite: (options) => sem.tryAcquire(writer(options)),
      withRead: scoped(reader),
      withWrite: scoped(writer),
    };
  }

  fairLock(name: string, options?: FairLockOptions): FairLock {
    this.#assertOpen();
    const fairName = checkKey(name, 'name');
    const o = checkOptions<FairLockOptions>(options, FAIR_LOCK_OPTIONS, 'options');
    // A semaphore of one permit: its queue is strictly first come, first served across processes.
    const sem = this.#permitsOf(fairName, 1, 'fair', o);
    const one = (options: AcquireOptions | undefined): PermitOptions => ({ ...checkOptions<AcquireOptions>(options, ACQUIRE_OPTIONS, 'options'), permits: 1 });
    return {
      name: fairName,
      acquire: (options) => sem.acquire(one(options)),
      tryAcquire: (options) => sem.tryAcquire(one(options)),
      withLock: (<T>(optionsOrFn: AcquireOptions | ((lease: Lease) => Promise<T> | T), maybeFn?: (lease: Lease) => Promise<T> | T): Promise<T> => {
        const fn = typeof optionsOrFn === 'function' ? optionsOrFn : maybeFn;
        const given = typeof optionsOrFn === 'function' ? undefined : optionsOrFn;
        if (typeof fn !== 'function') return Promise.reject(new InvalidOptionError('fn', 'a function to run while the lock is held', fn));
        return sem.withPermit(one(given), fn);
      }) as FairLock['withLock'],
    };
  }

  /** A semaphore handle: the permits of `name` under the key kind `kind` ("sem"; "rw" for a read-write lock; "fair" for a fair lock). */
  #permitsOf(name: string, limit: number, kind: SemaphoreKind, o: Partial<SemaphoreOptions>): Semaphore {
    if (!this.#backend.semaphores) {
      throw new UnsupportedError(
        `a ${kind === 'rw' ? 'read-write lock' : kind === 'fair' ? 'fair lock' : 'semaphore'} on ${this.#backend.name}`,
        'it needs one Redis (with replicas), a Cluster, or the in-memory backend: permits counted on each Redlock node cannot be decided by a majority, and compat mode is for legacy lock keys only',
      );
    }
    const defaults: AcquireOptions = {
      ...(o.ttl === undefined ? {} : { ttl: checkTtl(o.ttl) }),
      ...(o.wait === undefined ? {} : { wait: checkWait(o.wait) }),
      ...(o.strategy === undefined ? {} : { strategy: checkStrategy(o.strategy) }),
    };
    const keyCache = new Map<number, LockKeys>(); // by permits: a semaphore is used with one or two counts
    const keysFor = (permits: number): LockKeys => {
      let keys = keyCache.get(permits);
      if (!keys) keyCache.set(permits, (keys = semaphoreKeys(this.#settings.prefix, name, { limit, permits }, kind)));
      return keys;
    };
    const observedKind: LockKind = kind === 'rw' ? 'read-write' : kind === 'fair' ? 'fair' : 'semaphore';
    const acquire = (options: PermitOptions | undefined, once: boolean): Promise<Lease | null> => {
      const o = { ...defaults, ...checkOptions<PermitOptions>(options, PERMIT_OPTIONS, 'options') };
      const observer = this.#observer;
      if (!observer) return this.#acquirePermits(keysFor, limit, o, once);
      const t = observer.start(observedKind, name);
      return observer.track(t, this.#acquirePermits(keysFor, limit, o, once, t), o.signal);
    };
    return {
      name,
      limit,
      acquire: (options) => acquire(options, false) as Promise<Lease>,
      tryAcquire: (options) => acquire(options, true),
      withPermit: async <T>(optionsOrFn: PermitOptions | ((lease: Lease) => Promise<T> | T), maybeFn?: (lease: Lease) => Promise<T> | T) => {
        const fn = typeof optionsOrFn === 'function' ? optionsOrFn : maybeFn;
        const options = typeof optionsOrFn === 'function' ? undefined : optionsOrFn;
        if (typeof fn !== 'function') throw new InvalidOptionError('fn', 'a function to run while the permits are held', fn);
        return this.#runHolding((await acquire({ renew: true, ...options }, false))!, fn);
      },
    };
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const state of this.#keys.values()) {
      for (const waiter of [...state.waiters]) {
        this.#stopWaiter(state, waiter, new LockAbortedError(waiter.keys.name, 'the manager was closed'));
      }
    }
    for (const waiter of this.#permitWaiters) {
      waiter.stop ??= { reason: new LockAbortedError(waiter.keys.name, 'the manager was closed') };
      waiter.wake?.();
      waiter.cancel?.(waiter.stop.reason);
    }
    await Promise.all([...this.#held].map((lease) => lease.release().catch(() => {})));
    const inbox = await this.#inbox?.catch(() => undefined);
    await inbox?.close();
    await this.#backend.close();
  }

  #assertOpen(): void {
    if (this.#closed) throw new ClosedError();
  }

  /** A call's options, checked, with the manager's defaults for what it leaves out (`once`: no wait). */
  #callSettings(o: Partial<AcquireOptions>, once: boolean) {
    return {
      ttl: o.ttl === undefined ? this.#settings.ttl : checkTtl(o.ttl),
      wait: once ? 0 : o.wait === undefined ? this.#settings.wait : checkWait(o.wait),
      signal: checkSignal(o.signal),
      strategy: o.strategy === undefined ? this.#settings.strategy : checkStrategy(o.strategy),
      renew: checkRenew(o.renew),
    };
  }

  async #acquire(key: string, options: AcquireOptions | undefined, once: boolean, trace?: AcquireTrace): Promise<Lease | null> {
    this.#assertOpen();
    const name = checkKey(key);
    const o = checkOptions<AcquireOptions>(options, ACQUIRE_OPTIONS, 'options');
    const { ttl, wait, signal, strategy, renew } = this.#callSettings(o, once);
    if (this.#reentrant(o)) {
      const joined = this.#join(this.#scopes?.getStore()?.get(name), o);
      if (joined) {
        if (trace) trace.joined = true;
        return joined;
      }
    }
    signal?.throwIfAborted();
    const keys = this.#lockKeys.get(name);
    if (once) return this.#tryOnce(keys, ttl, renew, trace);

    // A lease of this process on the lock: ended now if its validity already ran out, else watched,
    // so that its expiry passes the lock on to the caller about to queue behind it.
    this.#keys.get(name)?.holder?.watchExpiry();
    const state = this.#state(name);
    const started = now();
    let settle: { resolve: (lease: Lease) => void; reject: (error: unknown) => void } | undefined;
    const onAbort = (): void => this.#stopWaiter(state, waiter, signal?.reason);
    const waiter: Waiter = newWaiter({
      keys,
      member: `${this.#id}:${(this.#nextWaiter++).toString(36)}`,
      token: this.#tokens.next(),
      ttl,
      renew,
      strategy,
      started,
      deadline: started + wait,
      state: 'queued',
      attempts: 0,
      resolve: (lease) => {
        signal?.removeEventListener('abort', onAbort);
        settle!.resolve(lease);
      },
      reject: (error) => {
        signal?.removeEventListener('abort', onAbort);
        settle!.reject(error);
      },
    });
    signal?.addEventListener('abort', onAbort, { once: true });
    state.waiters.push(waiter);

    let first: Attempt | undefined;
    if (!state.holder && state.waiters.length === 1) {
      // Nobody of this process holds or waits for the lock: try at once, without the waiting
      // machinery (the common, uncontended case). Callers arriving meanwhile queue behind.
      let outcome: Lease | Attempt;
      try {
        outcome = await this.#probe(state, waiter);
      } catch (error) {
        signal?.removeEventListener('abort', onAbort);
        throw error;
      }
      if (outcome instanceof Lease) {
        signal?.removeEventListener('abort', onAbort);
        return outcome;
      }
      first = outcome;
    }
    if (trace) trace.contended = true; // held here or elsewhere: this call waits
    return new Promise<Lease>((resolve, reject) => {
      settle = { resolve, reject };
      if (first) {
        void this.#serveHead(state, waiter, first);
        return;
      }
      this.#pump(state);
      // (A wait past 2^31 - 1 ms, about 25 days, needs no timer: setTimeout cannot hold it anyway.)
      if (waiter.state === 'queued' && wait < 2 ** 31) {
        // Queued behind callers of this process: the deadline ends the wait even while it waits in memory.
        waiter.timer = setTimeout(
          () => this.#stopWaiter(state, waiter, new LockTimeoutError(name, now() - started, waiter.attempts)),
          Math.max(0, wait),
        );
      }
    });
  }

  /**
   * The first attempt of a waiter that is alone: it becomes the active head at once. Resolves to
   * the lease when the lock was free, else to the attempt's outcome, which the head's wait loop
   * continues from (so waiting costs no extra attempt).
   */
  async #probe(state: KeyState, head: Waiter): Promise<Lease | Attempt> {
    head.state = 'active';
    this.#active.set(head.member, head);
    let first: Attempt;
    try {
      first = await this.#headAttempt(head);
    } catch (error) {
      this.#settle(state, head);
      this.#pump(state);
      this.#forget(state);
      throw error;
    }
    const { reply, sentAt } = first;
    if (reply.acquired && !head.stop && validUntil(sentAt, head.ttl, this.#settings.driftFactor) > now()) {
      return this.#leaseFor(state, head, reply.fence, sentAt, reply.replicated);
    }
    return first;
  }

  /**
   * One attempt of the head of a lock's local queue. With `notify` it queues in the backend only
   * once a grant can be heard: a release takes a queued waiter whose inbox has no listener for a
   * dead one, and passes it over.
   */
  async #headAttempt(head: Waiter): Promise<Attempt> {
    const inboxWasListening = head.strategy === 'notify' && this.#inboxReady?.listening(head.keys) === true;
    const sentAt = now();
    head.attempts++;
    head.inFlight = true;
    try {
      const reply = await this.#attempt(head.keys, head.token, head.ttl, inboxWasListening ? head.member : undefined, head);
      return { reply, sentAt, inboxWasListening };
    } finally {
      head.inFlight = false;
    }
  }


  async #tryOnce(keys: LockKeys, ttl: number, renew: RenewOptions | undefined, trace: AcquireTrace | undefined): Promise<Lease | null> {
    const existing = this.#keys.get(keys.name);
    existing?.holder?.watchExpiry(); // ends it now if its validity already ran out
    if (existing && (existing.holder || existing.waiters.length > 0)) {
      if (trace) trace.contended = true;
      return null;
    }
    const token = this.#tokens.next();
    const sentAt = now();
    const reply = await this.#attempt(keys, token, ttl);
    if (!reply.acquired) {
      if (trace) trace.contended = true;
      if (reply.outcome && undecided(reply.outcome)) throw new QuorumError(keys.name, reply.outcome);
      return null;
    }
    if (validUntil(sentAt, ttl, this.#settings.driftFactor) <= now()) {
      await this.#backend.release(keys, token).catch(() => {});
      return null;
    }
    const state = this.#state(keys.name);
    if (state.holder) {
      // Another call of this process got in while this one was in flight: both cannot hold it.
      await this.#backend.release(keys, token).catch(() => {});
      return null;
    }
    return this.#lease(state, keys, token, reply.fence, ttl, sentAt, renew, reply.replicated);
  }

  /** One attempt; if the reply is lost, the lock is given back rather than left held until its TTL. */
  /**
   * One attempt; if the reply is lost, the lock is given back rather than left held until its TTL.
   * With `limit`, the attempt also ends at the deadline (`limit.timeout()`) or when the waiter is
   * stopped, even if Redis never answers (a partition, a frozen server: the command stays queued in
   * the client); a reply that comes after that and won the lock is given back. One promise either
   * way: the hot path pays for a set entry, not for a wrapper.
   */
  #attempt(keys: LockKeys, token: string, ttl: number, member?: string, limit?: AttemptLimit): Promise<AcquireReply> {
    const queue = member === undefined ? undefined : { member, entryTtl: this.#settings.tuning.recheck * 3 };
    return new Promise<AcquireReply>((resolve, reject) => {
      let done = false;
      let entry: Deadline | undefined;
      const end = (): boolean => {
        if (done) return false;
        done = true;
        if (entry) attemptDeadlines.delete(entry);
        if (limit) limit.cancel = undefined;
        return true;
      };
      this.#backend.acquire(keys, token, ttl, queue).then(
        (reply) => {
          if (end()) resolve(reply);
          else if (reply.acquired) this.#backend.release(keys, token).catch(() => {}); // ended before it came
        },
        (error: unknown) => {
          this.#backend.release(keys, token).catch(() => {});
          if (end()) reject(error);
        },
      );
      if (!limit || this.#backend.boundsCalls) return;
      if (limit.deadline !== Infinity) {
        // A grace past the deadline: an attempt that a live Redis is about to answer (wait: 0 is
        // one attempt) finishes; only one that Redis does not answer is ended.
        entry = { at: Math.max(limit.deadline, now() + ATTEMPT_GRACE), expire: () => end() && reject(new LockTimeoutError(limit.keys.name, now() - limit.started, limit.attempts)) };
        attemptDeadlines.watch(entry);
      }
      limit.cancel = (reason) => end() && reject(reason);
    });
  }

  #state(name: string): KeyState {
    let state = this.#keys.get(name);
    if (!state) this.#keys.set(name, (state = { name, holder: undefined, waiters: [], streak: 0 }));
    return state;
  }

  /** Drops a lock's state once this process neither holds nor waits for it. */
  #forget(state: KeyState): void {
    if (!state.holder && state.waiters.length === 0 && this.#keys.get(state.name) === state) this.#keys.delete(state.name);
  }

  /** Lets the head of the queue talk to the backend when this process holds no lease on the lock. */
  #pump(state: KeyState): void {
    const head = state.waiters[0];
    if (state.holder || !head || head.state !== 'queued') return;
    head.state = 'active';
    clearTimeout(head.timer);
    void this.#serveHead(state, head);
  }

  async #serveHead(state: KeyState, head: Waiter, first?: Attempt): Promise<void> {
    let lease: Lease;
    this.#active.set(head.member, head);
    try {
      lease = await this.#waitRemotely(state, head, first);
    } catch (error) {
      this.#settle(state, head);
      if (head.strategy === 'notify' && head.attempts > 0) {
        // Out of the queue; a lock granted to it meanwhile is released, which passes it on.
        this.#backend
          .leave(head.keys, head.member, head.token)
          .then((granted) => (granted ? this.#backend.release(head.keys, head.token) : undefined))
          .catch(() => {});
      }
      head.reject(error);
      this.#pump(state);
      this.#forget(state);
      return;
    }
    this.#deliver(head, lease); // settled already: #waitRemotely's lease comes from #leaseFor
  }

  #settle(state: KeyState, waiter: Waiter): void {
    if (waiter.inboxJoined && waiter.state !== 'done') this.#inboxReady?.leave(waiter.keys);
    waiter.state = 'done';
    clearTimeout(waiter.timer);
    this.#active.delete(waiter.member);
    const index = state.waiters.indexOf(waiter);
    if (index >= 0) state.waiters.splice(index, 1);
  }

  /** Gives a lease to its waiter, unless the waiter gave up meanwhile: then it is released (and passed on). */
  #deliver(waiter: Waiter, lease: Lease): void {
    if (waiter.stop) {
      waiter.reject(waiter.stop.reason);
      lease.release().catch(() => {});
      return;
    }
    waiter.resolve(lease);
  }

  /** Ends a wait: at once while queued in memory; an active waiter ends through its own loop. */
  #stopWaiter(state: KeyState, waiter: Waiter, reason: unknown): void {
    if (waiter.state === 'done' || waiter.stop) return;
    if (waiter.state === 'queued') {
      this.#settle(state, waiter);
      waiter.reject(reason);
      this.#forget(state);
      return;
    }
    waiter.stop = { reason };
    waiter.wake?.();
    waiter.cancel?.(reason);
  }

  /** The head's loop: attempt, then sleep until an inbox message, the holder's TTL, a recheck or the deadline. */
  async #waitRemotely(state: KeyState, head: Waiter, first?: Attempt): Promise<Lease> {
    const { keys, token, ttl } = head;
    const member = head.strategy === 'notify' ? head.member : undefined;
    let pending = first;
    for (;;) {
      // The first time round, the probe's attempt (#probe), if it made one: continue from it.
      let attempt = pending;
      pending = undefined;
      if (!attempt) {
        throwIfStopped(head);
        const fence = takeGrant(head);
        if (fence !== undefined && validUntil(head.lastSent, ttl, this.#settings.driftFactor) - now() > ttl / 2) {
          // Granted by a release, without a round trip: valid from this waiter's last attempt,
          // which reached Redis before the release did.
          return this.#leaseFor(state, head, fence, head.lastSent);
        }
        // (A grant with too little validity left is refreshed by the next attempt: the lock holds our token.)
        attempt = await this.#headAttempt(head);
      }
      const { reply, sentAt, inboxWasListening } = attempt;
      if (!reply.acquired) head.lastSent = sentAt;
      if (reply.acquired) {
        if (validUntil(sentAt, ttl, this.#settings.driftFactor) > now()) {
          return this.#leaseFor(state, head, reply.fence, sentAt, reply.replicated);
        }
        await this.#backend.release(keys, token).catch(() => {}); // too late to be of use
      }
      throwIfStopped(head);
      if (!reply.acquired && reply.retryAfter !== undefined && reply.retryAfter > 0) {
        // Redlock split vote: contenders back off for random times, or they split again.
        head.jitter = true;
        await sleep(Math.min(reply.retryAfter, Math.max(0, head.deadline - now())), (wake) => (head.wake = wake));
        head.wake = undefined;
        head.jitter = false;
        throwIfStopped(head);
        if (head.deadline - now() <= 0) throw giveUp(keys.name, head, reply.outcome);
        continue;
      }
      const left = head.deadline - now();
      if (left <= 0) throw giveUp(keys.name, head, reply.acquired ? undefined : reply.outcome);
      if (member !== undefined && !inboxWasListening && !head.joined) {
        // Without an inbox the head still wakes at the holder's TTL and at each recheck.
        head.joined = true;
        const joining = this.#listen().then((opened) => {
          if (head.state === 'done') return; // settled meanwhile: nothing to leave later
          head.inboxJoined = true;
          return opened.join(keys);
        });
        // Bounded by the deadline and a stop (a hung server may never confirm a subscription);
        // wake-ups from the inbox meanwhile do not end it.
        let joined: boolean | undefined;
        const settled = joining.then(
          () => (joined = true),
          () => (joined = false),
        );
        while (joined === undefined && !head.stop && head.deadline - now() > 0) {
          await Promise.race([settled, sleep(head.deadline - now(), (wake) => (head.wake = wake))]);
          head.wake?.();
          head.wake = undefined;
        }
        if (joined === true) continue; // the lock may have been passed to us before the inbox was listening
        throwIfStopped(head);
      }
      const remaining = head.deadline - now();
      if (remaining <= 0) throw giveUp(keys.name, head, reply.acquired ? undefined : reply.outcome);
      if (!head.woken && head.granted === undefined) {
        const holderTtl = reply.acquired ? 0 : reply.ttl;
        const delay = Math.min(nextDelay(head.strategy, head.attempts - 1, holderTtl, this.#settings.tuning), remaining);
        await sleep(delay, (wake) => (head.wake = wake));
        head.wake = undefined;
      }
      head.woken = false;
    }
  }

  /**
   * A semaphore's acquire. Unlike a lock's callers, a semaphore's callers in one process do not
   * queue in memory behind each other (several may hold permits at once): each queues in the
   * backend, first come, first served, and is woken by releases through the manager's inbox.
   */
  async #acquirePermits(
    keysFor: (permits: number) => LockKeys,
    limit: number,
    o: PermitOptions,
    once: boolean,
    trace?: AcquireTrace,
  ): Promise<Lease | null> {
    this.#assertOpen();
    const { ttl, wait, signal, strategy, renew } = this.#callSettings(o, once);
    const permits = o.permits === undefined ? 1 : checkCount(o.permits, 'permits', 1);
    if (permits > limit) throw new InvalidOptionError('permits', `at most the semaphore's limit (${limit})`, permits);
    signal?.throwIfAborted();
    const keys = keysFor(permits);
    const name = keys.name;
    const token = this.#tokens.next();
    const lease = (fence: number, sentAt: number, replicated?: boolean): Lease => {
      const l = new Lease(this.#leaseContext, keys, token, fence, ttl, sentAt, renew, replicated);
      this.#held.add(l);
      if (renew) l.watchExpiry();
      if (this.#closed) void l.release().catch(() => {});
      return l;
    };

    // The common case first: the permits are free. The waiting machinery only if they are not.
    const started = now();
    const member = `${this.#id}:${(this.#nextWaiter++).toString(36)}`;
    // When the inbox already listens for this semaphore (another wait of this manager opened it),
    // the first attempt queues at once: a wake-up can reach it, and waiting costs no extra attempt.
    const queueFirst = !once && strategy === 'notify' && this.#inboxReady?.listening(keys) === true;
    const first = await this.#attempt(
      keys,
      token,
      ttl,
      queueFirst ? member : undefined,
      once ? undefined : { deadline: started + wait, keys, started, attempts: 1, cancel: undefined },
    );
    if (signal?.aborted) {
      // Aborted while the attempt was in flight: what it won is given back, its queue entry removed.
      if (first.acquired) this.#backend.release(keys, token).catch(() => {});
      else if (queueFirst) this.#backend.leave(keys, member, token).catch(() => {});
      throw signal.reason;
    }
    if (first.acquired) {
      if (validUntil(started, ttl, this.#settings.driftFactor) > now()) return lease(first.fence, started, first.replicated);
      await this.#backend.release(keys, token).catch(() => {}); // too late to be of use
    }
    if (trace && !first.acquired) trace.contended = true;
    if (once) return null;

    const waiter: Waiter = newWaiter({
      keys,
      member,
      token,
      ttl,
      renew,
      strategy,
      started,
      deadline: started + wait,
      state: 'active',
      attempts: 1,
      resolve: () => {},
      reject: () => {},
    });
    const onAbort = (): void => {
      waiter.stop ??= { reason: signal!.reason };
      waiter.wake?.();
      waiter.cancel?.(waiter.stop.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    this.#active.set(member, waiter);
    this.#permitWaiters.add(waiter);
    let queued = queueFirst;
    let won = false;
    let inbox: Inbox | undefined;
    let pending: AcquireReply | undefined = first; // the first round continues from that attempt
    if (queueFirst) {
      // Hold the inbox's interest in this semaphore while waiting (counted joins: on Cluster another
      // waiter's leave must not stop the subscription under us). Already listening: no attempt waits on it.
      waiter.joined = true;
      void this.#listen()
        .then(async (opened) => {
          inbox = opened;
          await opened.join(keys);
          if (waiter.state === 'done') opened.leave(keys);
          else waiter.inboxJoined = true;
        })
        .catch(() => {});
    }
    try {
      for (;;) {
        let reply: AcquireReply;
        if (pending) {
          reply = pending;
          pending = undefined;
        } else {
          throwIfStopped(waiter);
          const listening = strategy === 'notify' && this.#inboxReady?.listening(keys) === true;
          const sentAt = now();
          waiter.attempts++;
          waiter.inFlight = true;
          try {
            reply = await this.#attempt(keys, token, ttl, listening ? member : undefined, waiter);
          } finally {
            waiter.inFlight = false;
          }
          queued ||= listening;
          if (reply.acquired) {
            if (validUntil(sentAt, ttl, this.#settings.driftFactor) > now()) {
              won = true;
              return lease(reply.fence, sentAt, reply.replicated);
            }
            await this.#backend.release(keys, token).catch(() => {}); // too late to be of use
          }
        }
        throwIfStopped(waiter);
        const left = waiter.deadline - now();
        if (left <= 0) throw new LockTimeoutError(name, now() - started, waiter.attempts);
        if (strategy === 'notify' && !queued && !waiter.joined) {
          // Listen for wake-ups first, then queue in the backend with the next attempt.
          waiter.joined = true;
          const joining = this.#listen().then(async (opened) => {
            inbox = opened;
            await opened.join(keys);
            waiter.inboxJoined = true;
          });
          // Bounded by the deadline and a stop; wake-ups meanwhile (an inbox reconnect wakes every
          // waiter) do not end it, or the next attempt would not queue.
          let joined: boolean | undefined;
          const settled = joining.then(
            () => (joined = true),
            () => (joined = false),
          );
          while (joined === undefined && !waiter.stop && waiter.deadline - now() > 0) {
            await Promise.race([settled, sleep(waiter.deadline - now(), (wake) => (waiter.wake = wake))]);
            waiter.wake?.();
            waiter.wake = undefined;
          }
          continue;
        }
        if (!waiter.woken) {
          // ttl 0: the queue holds it back, not a holder: only a wake-up or the re-check ends the sleep.
          const holderTtl = reply.acquired ? 0 : reply.ttl > 0 ? reply.ttl : -1;
          await sleep(Math.min(nextDelay(strategy, waiter.attempts - 1, holderTtl, this.#settings.tuning), left), (wake) => (waiter.wake = wake));
          waiter.wake = undefined;
        }
        waiter.woken = false;
      }
    } finally {
      signal?.removeEventListener('abort', onAbort);
      this.#active.delete(member);
      this.#permitWaiters.delete(waiter);
      waiter.state = 'done';
      if (queued && !won) {
        // Out of the queue (waking the next if it was first); permits won by a lost reply are given back.
        void this.#backend
          .leave(keys, member, token)
          .then((holds) => (holds ? this.#backend.release(keys, token) : undefined))
          .catch(() => {});
      }
      if (waiter.inboxJoined) inbox?.leave(keys);
    }
  }

  /** Opens the manager's inbox once; later calls share it. */
  #listen(): Promise<Inbox> {
    if (!this.#inbox) {
      const opening = this.#backend.watchInbox(this.#id, (member, fence) => {
        if (member === undefined || fence === undefined) {
          // Reconnected: messages may have been lost. Everyone looks again.
          for (const waiter of this.#active.values()) {
            waiter.woken = true;
            waiter.wake?.();
          }
          return;
        }
        // A waiter that left already: its leave() finds the grant and releases it.
        const waiter = this.#active.get(member);
        if (!waiter) return;
        if (fence === 0) {
          // Redlock: a node freed the lock; the waiter asks the quorum again.
          waiter.woken = true;
          if (!waiter.jitter) waiter.wake?.();
          return;
        }
        // An attempt in flight will find the lock holding our token (or the next one will).
        if (waiter.inFlight) waiter.woken = true;
        else waiter.granted = fence;
        waiter.wake?.();
      });
      opening.then(
        (inbox) => {
          if (this.#inbox === opening) this.#inboxReady = inbox;
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
   * The lease of a waiter that got the lock (its probe, its wait, or a local hand-off). The waiter
   * leaves the local queue first, so that the lease watches its expiry only when other callers of
   * this process wait behind it (not for the waiter itself).
   */
  #leaseFor(state: KeyState, waiter: Waiter, fence: number, sentAt: number, replicated?: boolean): Lease {
    this.#settle(state, waiter);
    return this.#lease(state, waiter.keys, waiter.token, fence, waiter.ttl, sentAt, waiter.renew, replicated);
  }

  #lease(
    state: KeyState,
    keys: LockKeys,
    token: string,
    fence: number,
    ttl: number,
    sentAt: number,
    renew: RenewOptions | undefined,
    replicated?: boolean,
  ): Lease {
    const lease = new Lease(this.#leaseContext, keys, token, fence, ttl, sentAt, renew, replicated);
    state.holder = lease;
    this.#held.add(lease);
    // Its expiry must be seen the moment it comes when a watchdog runs or callers of this process
    // wait behind it (they get the lock when it ends). This may end it at once, through onEnd.
    if (renew || state.waiters.length > 0) lease.watchExpiry();
    if (this.#closed) void lease.release().catch(() => {});
    // Informational: a failure (or a lease already gone) only leaves the holder unrecorded.
    else if (this.#settings.holder !== undefined) void this.#backend.recordHolder(keys, token, this.#settings.holder).catch(() => {});
    return lease;
  }

  /**
   * Releases a lease. When a caller of this process waits for the same lock, the lock is handed to
   * it in the release's own round trip (a new token and a new fence), up to `localHandoffs` times
   * in a row; then it goes to the next waiter of another process, if any.
   */
  async #release(lease: Lease, keys: LockKeys, token: string): Promise<OwnershipReply> {
    const state = this.#keys.get(keys.name);
    const next = state?.holder === lease && this.#settings.localHandoffs > 0 && this.#backend.handsOff ? state.waiters[0] : undefined;
    if (!state || !next || next.state !== 'queued') return this.#plainRelease(keys, token);
    next.state = 'active'; // being handed the lock: not for the timeout or the pump to take
    const sentAt = now();
    let reply;
    try {
      reply = await this.#backend.release(keys, token, {
        token: next.token,
        ttl: next.ttl,
        passOn: state.streak >= this.#settings.localHandoffs,
      });
    } catch (error) {
      next.state = 'queued';
      this.#pump(state); // the lease may have ended meanwhile (its expiry): the waiter goes on
      throw error;
    }
    if (typeof reply !== 'object') {
      next.state = 'queued'; // released to another process, or lost: the waiter queues in the backend
      this.#pump(state);
      return reply;
    }
    if (validUntil(sentAt, next.ttl, this.#settings.driftFactor) <= now()) {
      // The round trip outlasted the new lease's validity: give it back; the waiter tries again
      // (with the same token, sent after this release) once the old lease has ended.
      this.#backend.release(keys, next.token).catch(() => {});
      next.state = 'queued';
      this.#pump(state);
      return 'ok';
    }
    this.#held.delete(lease);
    const handed = this.#leaseFor(state, next, reply.handedOff, sentAt);
    state.streak++;
    this.#deliver(next, handed);
    return 'ok';
  }

  async #plainRelease(keys: LockKeys, token: string): Promise<OwnershipReply> {
    const reply = await this.#backend.release(keys, token);
    return typeof reply === 'object' ? 'ok' : reply;
  }

  #leaseEnded(lease: Lease): void {
    this.#observer?.leaseEnded(lease);
    this.#held.delete(lease);
    const state = this.#keys.get(lease.key);
    if (!state || state.holder !== lease) return;
    state.holder = undefined;
    state.streak = 0;
    this.#pump(state);
    this.#forget(state);
  }
}

/** Releases parts taken so far (a rollback): errors are dropped, a part that cannot be released expires by its TTL. */
async function releaseAll(parts: readonly Lease[]): Promise<void> {
  await Promise.all(parts.map((p) => p.release().catch(() => {})));
}

/** The keys of a multi-lock: a non-empty array of distinct valid names, sorted in the global order (by code unit). */
function checkKeySet(value: unknown): string[] {
  if (!Array.isArray(value) || value.length === 0) {
    throw new InvalidOptionError('keys', 'a non-empty array of lock names, e.g. ["orders:42", "stock:7"]', value);
  }
  const names = value.map((key: unknown) => checkKey(key));
  const seen = new Set<string>();
  for (const [i, name] of names.entries()) {
    if (seen.has(name)) throw new InvalidOptionError(`keys[${i}]`, 'a lock name not already in the list', name);
    seen.add(name);
  }
  return names.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

/** The error of a wait that ran out: Redlock's quorum error when node errors left it undecided, else a timeout. */
function giveUp(key: string, waiter: Waiter, outcome: QuorumOutcome | undefined): Error {
  if (outcome && undecided(outcome)) return new QuorumError(key, outcome);
  return new LockTimeoutError(key, now() - waiter.started, waiter.attempts, outcome);
}

/** One attempt of a queue's head: its reply, when it was sent, and whether the inbox listened then. */
interface Attempt {
  readonly reply: AcquireReply;
  readonly sentAt: number;
  readonly inboxWasListening: boolean;
}

/** How long past its waiter's deadline an attempt in flight may still finish, ms. */
const ATTEMPT_GRACE = 250;

/**
 * Attempts in flight that have a deadline, on one timer for all of them: only a Redis that does
 * not answer ever leaves one to expire.
 */
const attemptDeadlines = new Deadlines();

/** What ends an attempt besides its reply: the waiter's deadline, and its stop through `cancel` (see #attempt). A Waiter is one. */
interface AttemptLimit {
  readonly deadline: number;
  readonly keys: LockKeys;
  readonly started: number;
  readonly attempts: number;
  cancel: ((reason: unknown) => void) | undefined;
}

/** Takes the fence of a grant the inbox announced, if any. */
function takeGrant(waiter: Waiter): number | undefined {
  const fence = waiter.granted;
  waiter.granted = undefined;
  return fence;
}

/** Throws the reason a wait was stopped for, if it was. (A function, so narrowing does not cross awaits.) */
function throwIfStopped(waiter: Waiter): void {
  if (waiter.stop) throw waiter.stop.reason;
}

function checkRenew(value: unknown): RenewOptions | undefined {
  if (value === undefined || value === false) return undefined;
  if (value === true) return {};
  const o = checkOptions<RenewOptions>(value, ['every', 'maxHold'], 'renew');
  const renew: { every?: number; maxHold?: number } = {};
  if (o.every !== undefined) renew.every = checkTtl(o.every, 'renew.every');
  if (o.maxHold !== undefined) renew.maxHold = checkTtl(o.maxHold, 'renew.maxHold');
  return renew;
}
