import { randomBytes } from 'node:crypto';
import type { FencedValue } from './backend/backend.js';
import { chooseBackend, type EvictionWarning } from './backend/choose.js';
import type { Backend } from './backend/backend.js';
import { BackendError, ClosedError, InvalidOptionError, LockAbortedError, StaleFenceError } from './errors.js';
import { fairLockOver, FAIR_LOCK_OPTIONS, type FairLock, type FairLockOptions } from './fair-lock.js';
import { KeysCache } from './keys.js';
import { Lease } from './lease/lease.js';
import { Renewals } from './lease/renewals.js';
import { LinkedSet } from './linked-set.js';
import { lockInfo, type LockInfo } from './lock-info.js';
import type { Locks } from './locks-api.js';
import { LockWaits } from './lock-waits.js';
import type { ManagerContext } from './manager/context.js';
import { boundedCall } from './manager/bounded-call.js';
import { LastMade } from './manager/last-made.js';
import { refuseCallbackFirst, runHolding, splitCallback } from './manager/run-holding.js';
import { callSettings, checkCount, isReentrant, readSettings, type Settings } from './manager/settings.js';
import { acquireAll, type MultiAcquireContext, type StoppableAttempt } from './multi-acquire.js';
import type { MultiLease } from './multi-lease.js';
import { observerFor, type AcquireTrace, type Observer } from './observe/observer.js';
import { ACQUIRE_OPTIONS, CLOSE_OPTIONS, LOCKS_OPTIONS, type AcquireOptions, type CloseOptions, type LocksOptions } from './options.js';
import { Permits } from './permits.js';
import { readWriteLockOver, READ_WRITE_LOCK_OPTIONS, type ReadWriteLock, type ReadWriteLockOptions } from './read-write-lock.js';
import { Reentrancy } from './reentrancy.js';
import { MAX_PERMITS, SEMAPHORE_OPTIONS, type Semaphore, type SemaphoreOptions } from './semaphore.js';
import { HolderNames } from './holder-names.js';
import { TokenSource } from './token.js';
import { checkFence, checkKey, checkOptions } from './validate.js';
import { InboxListener } from './wait/inbox-listener.js';
import { QueueKeeper } from './wait/queue-keeper.js';

/** How long `close()` waits for waits to end and leave the queue, ms. */
const CLOSE_GRACE = 1000;
/** How long a forced release's note for the broken holder outlives that lease's TTL left, ms. */
const FORCED_NOTE_MS = 5000;

/** Resolves when `promise` settles or `ms` have passed, whichever comes first; leaves no timer behind. */
function within(ms: number, promise: Promise<unknown>): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)));
  return Promise.race([promise.then(() => undefined, () => undefined), limit]).finally(() => clearTimeout(timer));
}

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
  const settings = readSettings(o);
  // The eviction-policy check runs only when someone would hear its warning; its reply comes
  // after createLocks returns, so `late.observer` is set by then.
  const late: { observer?: Observer | undefined } = {};
  const hooks = o.hooks as { evictionPolicy?: unknown } | undefined;
  const onEviction: EvictionWarning | undefined =
    o.logger !== undefined || hooks?.evictionPolicy !== undefined ? (report, node) => late.observer?.evictionPolicy(report, node) : undefined;
  // Bad observability options are refused before chooseBackend opens a connection (a client
  // made from a URL would keep the process alive after the throw).
  const observe = observerFor(o, settings.prefix);
  const backend = chooseBackend(o, settings.prefix, onEviction);
  late.observer = observe(backend.name);
  return new LockManager(backend, settings, late.observer);
}

/**
 * The front door: checks each call's options, and hands it to the room that owns it: the locks'
 * queues ({@link LockWaits}), the permit waits ({@link Permits}), the multi-lock
 * ({@link acquireAll}), reentrancy scopes ({@link Reentrancy}). It holds no waiting logic itself.
 */
class LockManager implements Locks {
  readonly #ctx: ManagerContext;
  readonly #locks: LockWaits;
  readonly #permits: Permits;
  readonly #reentrancy = new Reentrancy();
  #closed = false;
  /** One-step multi-lock attempts in flight (see acquireAll): `close()` ends them at once. */
  readonly #atOnce = new Set<StoppableAttempt>();

  constructor(backend: Backend, settings: Settings, observer: Observer | undefined) {
    const id = randomBytes(8).toString('hex');
    let nextWaiter = 0;
    const tokens = new TokenSource();
    const holders = new HolderNames(backend, settings.prefix, tokens.tag, settings.holder);
    const inbox = new InboxListener(backend, id);
    const ctx: ManagerContext = {
      backend,
      settings,
      observer,
      driftFactor: settings.driftFactor,
      tuning: settings.tuning,
      tokens,
      holders,
      lockKeys: new KeysCache(settings.prefix),
      inbox,
      keeper: new QueueKeeper(backend, inbox, settings.tuning),
      held: new LinkedSet<Lease>(),
      lastMade: new LastMade(),
      leaving: new Set<Promise<unknown>>(),
      isClosed: () => this.#closed,
      assertOpen: () => this.#assertOpen(),
      nextMember: () => `${id}:${(nextWaiter++).toString(36)}`,
      leaseContext: {
        backend,
        driftFactor: settings.driftFactor,
        renewals: new Renewals(backend, () => holders.touch()),
        touchHolder: () => holders.touch(),
        release: observer?.tracing
          ? (lease, keys, token, at) => observer.traceRelease(lease, () => this.#locks.release(lease, keys, token, at))
          : (lease, keys, token, at) => this.#locks.release(lease, keys, token, at),
        onEnd: (lease) => {
          observer?.leaseEnded(lease);
          ctx.held.delete(lease);
          this.#locks.leaseEnded(lease);
        },
        onRenew: observer ? (lease, error) => observer.renewal(lease, error) : undefined,
        onLetExpire: (lease) => {
          ctx.held.delete(lease);
          holders.keepFor(lease.validUntil);
        },
      },
    };
    this.#ctx = ctx;
    this.#locks = new LockWaits(ctx);
    this.#permits = new Permits(ctx);
  }

  get backend(): string {
    return this.#ctx.backend.name;
  }

  acquire(key: string, options?: AcquireOptions): Promise<Lease> {
    return this.#acquire(key, options, false) as Promise<Lease>;
  }

  tryAcquire(key: string, options?: Omit<AcquireOptions, 'wait'>): Promise<Lease | null> {
    return this.#acquire(key, options, true);
  }

  async withLock<T>(key: string, optionsOrFn: AcquireOptions | ((lease: Lease) => Promise<T> | T), maybeFn?: (lease: Lease) => Promise<T> | T): Promise<T> {
    refuseCallbackFirst(key, 'key', 'withLock(key, fn)', "the lock's name");
    const { options, fn } = splitCallback(optionsOrFn, maybeFn, 'the lock is held');
    if (!isReentrant(this.#ctx.settings, options)) return runHolding(await this.acquire(key, { renew: true, ...options }), fn);
    this.#assertOpen();
    const name = checkKey(key);
    return this.#reentrancy.withLock(name, options, fn, (o) => this.acquire(name, o));
  }

  acquireAll(keys: readonly string[], options?: AcquireOptions): Promise<MultiLease> {
    return acquireAll(this.#multi(), keys, options, false) as Promise<MultiLease>;
  }

  tryAcquireAll(keys: readonly string[], options?: Omit<AcquireOptions, 'wait'>): Promise<MultiLease | null> {
    return acquireAll(this.#multi(), keys, options, true);
  }

  async withLocks<T>(keys: readonly string[], optionsOrFn: AcquireOptions | ((lease: MultiLease) => Promise<T> | T), maybeFn?: (lease: MultiLease) => Promise<T> | T): Promise<T> {
    refuseCallbackFirst(keys, 'keys', 'withLocks(keys, fn)', "the array of the locks' names");
    const { options, fn } = splitCallback(optionsOrFn, maybeFn, 'the locks are held');
    // Renewed by default; a reentrant call opens a scope for each key it takes.
    const take = (o: AcquireOptions | undefined): Promise<MultiLease> => acquireAll(this.#multi(), keys, o, false, true) as Promise<MultiLease>;
    if (!isReentrant(this.#ctx.settings, options)) return runHolding(await take(options), fn);
    return this.#reentrancy.withLocks(options, fn, take);
  }

  async fencedWrite(resource: string, value: string, fence: number | Lease): Promise<void> {
    this.#assertOpen();
    checkKey(resource, 'resource');
    if (typeof value !== 'string') throw new InvalidOptionError('value', 'a string (serialise objects with JSON.stringify)', value);
    const f = checkFence(fence instanceof Lease ? fence.fence : fence);
    const backend = this.#ctx.backend;
    const reply = await boundedCall(backend, 'fencedWrite', `a fenced write of "${resource}"`, backend.fencedWrite(resource, value, f));
    if (!reply.accepted) throw new StaleFenceError(resource, f, reply.highest);
  }

  async fencedRead(resource: string): Promise<FencedValue | null> {
    this.#assertOpen();
    const backend = this.#ctx.backend;
    return boundedCall(backend, 'fencedRead', `a fenced read of "${resource}"`, backend.fencedRead(checkKey(resource, 'resource')));
  }

  async inspect(key: string): Promise<LockInfo> {
    this.#assertOpen();
    const name = checkKey(key);
    return boundedCall(this.#ctx.backend, 'inspect', `a look at lock "${name}"`, this.#inspect(name));
  }

  async #inspect(name: string): Promise<LockInfo> {
    const snapshot = await this.#ctx.backend.inspect(this.#ctx.lockKeys.get(name));
    return lockInfo(name, snapshot, await this.#ctx.holders.holderOf(snapshot));
  }

  async list(pattern = '*'): Promise<LockInfo[]> {
    this.#assertOpen();
    if (typeof pattern !== 'string' || pattern === '') throw new InvalidOptionError('pattern', 'a non-empty Redis glob pattern, e.g. "orders:*"', pattern);
    const backend = this.#ctx.backend;
    // Bounded per round trip, not as a whole (a large keyspace takes many SCAN pages, each bounded
    // where it is sent: scanAll), so that a list that takes long because it is long does not fail.
    const names = await backend.lockNames(this.#ctx.settings.prefix, pattern);
    const infos = await Promise.all(names.map((name) => boundedCall(backend, 'list', `a look at lock "${name}"`, this.#inspect(name))));
    return infos.filter((info) => info.held);
  }

  async forceRelease(key: string): Promise<LockInfo | null> {
    this.#assertOpen();
    const name = checkKey(key);
    return boundedCall(this.#ctx.backend, 'forceRelease', `a forced release of lock "${name}" (it may still run)`, this.#forceRelease(name));
  }

  async #forceRelease(name: string): Promise<LockInfo | null> {
    const keys = this.#ctx.lockKeys.get(name);
    const backend = this.#ctx.backend;
    // The lease can change hands between the look and the release: look again, a few times.
    for (let attempt = 0; attempt < 5; attempt++) {
      const snapshot = await backend.inspect(keys);
      if (snapshot.token === null) return null;
      // A note for the holder, so that it reports a forced release rather than an expiry: it
      // outlives the lease's own expiry (a lease past it counts itself expired anyway).
      await backend.markForced?.(keys, snapshot.token, Math.max(snapshot.ttl, 0) + FORCED_NOTE_MS);
      const reply = await backend.release(keys, snapshot.token);
      if (reply === 'ok') return lockInfo(name, snapshot, await this.#ctx.holders.holderOf(snapshot));
    }
    throw new BackendError('forceRelease', `the lock "${name}" kept changing hands; try again`);
  }

  semaphore(name: string, options: SemaphoreOptions): Semaphore {
    this.#assertOpen();
    const semName = checkKey(name, 'name');
    const o = checkOptions<SemaphoreOptions>(options, SEMAPHORE_OPTIONS, 'options');
    const limit = checkCount(o.limit, 'limit', 1, 'a positive integer number of permits');
    if (limit > MAX_PERMITS) throw new InvalidOptionError('limit', `at most ${MAX_PERMITS} permits`, limit);
    return this.#permits.semaphore(semName, limit, 'sem', o);
  }

  readWriteLock(name: string, options?: ReadWriteLockOptions): ReadWriteLock {
    this.#assertOpen();
    const rwName = checkKey(name, 'name');
    const o = checkOptions<ReadWriteLockOptions>(options, READ_WRITE_LOCK_OPTIONS, 'options');
    // Readers take one permit, a writer all of them; the queue is first come, first served.
    return readWriteLockOver(this.#permits.semaphore(rwName, MAX_PERMITS, 'rw', o), this.#reentrancy, this.#ctx.settings);
  }

  fairLock(name: string, options?: FairLockOptions): FairLock {
    this.#assertOpen();
    const fairName = checkKey(name, 'name');
    const o = checkOptions<FairLockOptions>(options, FAIR_LOCK_OPTIONS, 'options');
    // A semaphore of one permit: its queue is strictly first come, first served across processes.
    return fairLockOver(this.#permits.semaphore(fairName, 1, 'fair', o));
  }

  async close(options?: CloseOptions): Promise<void> {
    const { release = true } = checkOptions<CloseOptions>(options, CLOSE_OPTIONS, 'options');
    if (typeof release !== 'boolean') throw new InvalidOptionError('options.release', 'true or false', release);
    if (this.#closed) return;
    this.#closed = true;
    // Every wait ends, and takes its queue entries out, before the connections close: bounded, for
    // a Redis that does not answer (its entries then expire by themselves, within 3 × recheck).
    const ctx = this.#ctx;
    for (const attempt of this.#atOnce) attempt.cancel?.(new LockAbortedError(attempt.names, 'the manager was closed'));
    const stopped = Promise.all([this.#locks.stopAll(), this.#permits.stopAll()]).then(() => Promise.all(ctx.leaving));
    await within(CLOSE_GRACE, stopped);
    if (release) await Promise.all(this.#ctx.held.toArray().map((lease) => lease.release().catch(() => {})));
    else for (const lease of this.#ctx.held.toArray()) lease.letExpire();
    await within(CLOSE_GRACE, this.#ctx.holders.unregister());
    this.#ctx.keeper?.close();
    await this.#ctx.inbox.close();
    await this.#ctx.backend.close();
    ctx.lastMade.clear();
  }

  #assertOpen(): void {
    if (this.#closed) throw new ClosedError();
  }

  /** One lock: a reentrant call joins its scope's lease; otherwise the locks' queues take it. Observed when someone listens. */
  #acquire(key: string, options: AcquireOptions | undefined, once: boolean): Promise<Lease | null> {
    const observer = this.#ctx.observer;
    if (!observer) return this.#acquireLock(key, options, once);
    const t = observer.start('lock', String(key));
    return observer.track(t, this.#acquireLock(key, options, once, t), options?.signal);
  }

  /** Not an async function (the hot path): a refused call rejects all the same. */
  #acquireLock(key: string, options: AcquireOptions | undefined, once: boolean, trace?: AcquireTrace): Promise<Lease | null> {
    try {
      this.#assertOpen();
      const name = checkKey(key);
      const o = checkOptions<AcquireOptions>(options, ACQUIRE_OPTIONS, 'options');
      const call = callSettings(this.#ctx.settings, o, once);
      if (isReentrant(this.#ctx.settings, o)) {
        const joined = this.#reentrancy.join(name, o);
        if (joined) {
          if (trace) trace.joined = true;
          return Promise.resolve(joined);
        }
      }
      call.signal?.throwIfAborted();
      return this.#locks.acquire(this.#ctx.lockKeys.get(name), call, once, trace);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  #multi(): MultiAcquireContext {
    return {
      ctx: this.#ctx,
      locks: this.#locks,
      acquire: (name: string, o: AcquireOptions) => this.acquire(name, o),
      tryAcquire: (name: string, o: AcquireOptions) => this.tryAcquire(name, o),
      join: (names: readonly string[], o: AcquireOptions) => (isReentrant(this.#ctx.settings, o) ? this.#reentrancy.joinAll(names, o) : new Map()),
      inFlight: this.#atOnce,
    };
  }
}
