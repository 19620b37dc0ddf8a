import { AsyncLocalStorage } from 'node:async_hooks';
import { InvalidOptionError, UpgradeDeadlockError } from './errors.js';
import type { Lease } from './lease/lease.js';
import { enterLease } from './lease/reentrant-lease.js';
import { runHolding } from './manager/run-holding.js';
import { checkRenew } from './manager/settings.js';
import type { MultiLease } from './multi-lease.js';
import { ACQUIRE_OPTIONS, type AcquireOptions } from './options.js';
import { checkOptions, checkSignal, checkTtl, checkWait } from './validate.js';
import { checkStrategy } from './wait/strategy.js';

/** What a hold lets its holder do: a lock and a read-write lock's write lease are exclusive; a read lease is shared. */
export type HoldMode = 'exclusive' | 'shared';

/** Takes the lease a new scope will hold, with the scope's options (`renew` decided, `reentrant: false`). */
export type AcquireForScope = (options: AcquireOptions) => Promise<Lease>;

/** What a scope holds: a lock, or a read-write lock's read or write lease (a lock and a read-write lock may share a name). */
type ScopeKey = `lock:${string}` | `rw:${string}`;

/** A reentrant scope (`withLock`, a key of `withLocks`, `withRead`, `withWrite`): the lease it holds, while its callback runs. */
interface Scope {
  readonly lease: Lease;
  /** Whether the lease has a watchdog. */
  readonly renewed: boolean;
  readonly mode: HoldMode;
  /** Until the callback ends: code it started that runs later (a timer, a detached promise) is no longer inside. */
  open: boolean;
}

/** The reentrant scopes of one manager in an async context. */
type Scopes = ReadonlyMap<ScopeKey, Scope>;

/**
 * The reentrant scopes of one manager: which locks (and read-write locks) a `withLock`,
 * `withLocks`, `withRead` or `withWrite` of this async context holds, so that a reentrant call of
 * one of them joins the lease instead of waiting for itself. What a reentrant call does about a
 * scope of its context, for every kind of acquire (one lock, several, a read, a write), is decided
 * in one place, `#joinable`: join the lease, refuse, or acquire as usual.
 */
export class Reentrancy {
  /** Made by the first reentrant scope (none on the default path). */
  #scopes: AsyncLocalStorage<Scopes> | undefined;

  /**
   * A reentrant call's hold on the lease of the open scope of this context that holds the lock
   * `name`; undefined when there is none to join (the call then acquires as usual).
   */
  join(name: string, options: AcquireOptions | undefined): Lease | undefined {
    return entered(this.#joinable(`lock:${name}`, name, 'exclusive', options));
  }

  /**
   * A reentrant multi-lock's holds, by name, on the leases of the open scopes of this context that
   * hold some of `names`; it acquires the others as usual. Every key is decided before any hold is
   * taken: a refusal (a lease that was lost, an option it cannot meet) leaves none.
   */
  joinAll(names: readonly string[], options: AcquireOptions | undefined): Map<string, Lease> {
    const joinable = names.flatMap((name) => {
      const lease = this.#joinable(`lock:${name}`, name, 'exclusive', options);
      return lease ? [[name, lease] as const] : [];
    });
    return new Map(joinable.map(([name, lease]) => [name, enterLease(lease)]));
  }

  /** A reentrant read (`shared`) or write (`exclusive`) of the read-write lock `name`: a hold on its scope's lease, as {@link Reentrancy.join}. */
  joinReadWrite(name: string, mode: HoldMode, options: AcquireOptions | undefined): Lease | undefined {
    return entered(this.#joinable(`rw:${name}`, name, mode, options));
  }

  /**
   * A reentrant `withLock`: joins the scope of this context that holds `name`, or acquires the
   * lock and runs `fn` in a new scope that records its lease.
   */
  withLock<T>(name: string, options: AcquireOptions | undefined, fn: (lease: Lease) => Promise<T> | T, acquire: AcquireForScope): Promise<T> {
    return this.#within(`lock:${name}`, name, 'exclusive', options, fn, acquire);
  }

  /** A reentrant `withRead` (`shared`) or `withWrite` (`exclusive`) of the read-write lock `name`, as {@link Reentrancy.withLock}. */
  withReadWrite<T>(name: string, mode: HoldMode, options: AcquireOptions | undefined, fn: (lease: Lease) => Promise<T> | T, acquire: AcquireForScope): Promise<T> {
    return this.#within(`rw:${name}`, name, mode, options, fn, acquire);
  }

  /**
   * A reentrant `withLocks`: `acquireAll` joins the keys that scopes of this context hold (through
   * {@link Reentrancy.joinAll}) and takes the others; `fn` runs in a new scope for each key taken,
   * so that a reentrant call of one of them joins its part.
   */
  async withLocks<T>(options: AcquireOptions | undefined, fn: (lease: MultiLease) => Promise<T> | T, acquireAll: (options: AcquireOptions | undefined) => Promise<MultiLease>): Promise<T> {
    const storage = this.#storage();
    const outer = storage.getStore();
    const multi = await acquireAll(options);
    const renewed = checkRenew(options?.renew ?? true) !== undefined;
    // A part with the token of its key's scope lease is a hold on it: that scope stays as it is.
    const taken = multi.leases.filter((part) => outer?.get(`lock:${part.key}`)?.lease.token !== part.token);
    const opened = taken.map((lease) => [`lock:${lease.key}`, { lease, renewed, mode: 'exclusive', open: true }] as const);
    return this.#run(storage, outer, opened, multi, fn);
  }

  /**
   * The one decision of a reentrant call about the scope of this context that holds `key`. It
   * returns the lease to join; undefined to acquire as usual (no open scope holds it, or its lease
   * was released early by hand: the scope holds nothing); or it throws: a write inside a read
   * scope ({@link UpgradeDeadlockError}: it would wait for itself), an option the lease cannot
   * meet, or the lease's LeaseLostError (the code inside is no longer protected, and a new lease
   * would hide the gap).
   */
  #joinable(key: ScopeKey, name: string, mode: HoldMode, options: AcquireOptions | undefined): Lease | undefined {
    const scope = this.#scopes?.getStore()?.get(key);
    if (!scope?.open) return undefined;
    const o = checkOptions<AcquireOptions>(options, ACQUIRE_OPTIONS, 'options');
    const { lease } = scope;
    if (mode === 'exclusive' && scope.mode === 'shared' && lease.state === 'held') throw new UpgradeDeadlockError(name);
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
    return state === 'held' ? lease : undefined;
  }

  /** Joins the scope of this context that holds `key`, or acquires its lease and runs `fn` in a new scope that records it. */
  async #within<T>(key: ScopeKey, name: string, mode: HoldMode, options: AcquireOptions | undefined, fn: (lease: Lease) => Promise<T> | T, acquire: AcquireForScope): Promise<T> {
    const storage = this.#storage();
    const outer = storage.getStore();
    const joined = entered(this.#joinable(key, name, mode, options));
    if (joined) return runHolding(joined, fn);
    // The scope's own default renewal is not a request: a joined call above ran under the lease as it is.
    const renew = checkRenew(options?.renew ?? true);
    const lease = await acquire({ ...options, renew: renew ?? false, reentrant: false });
    return this.#run(storage, outer, [[key, { lease, renewed: renew !== undefined, mode, open: true }]], lease, fn);
  }

  /** Runs `fn` holding `holding` in the scopes of `outer` and the `opened` ones; these close when `fn` ends, before the release. */
  #run<L extends Lease | MultiLease, T>(
    storage: AsyncLocalStorage<Scopes>,
    outer: Scopes | undefined,
    opened: readonly (readonly [ScopeKey, Scope])[],
    holding: L,
    fn: (lease: L) => Promise<T> | T,
  ): Promise<T> {
    const inner = new Map(outer);
    for (const [key, scope] of opened) inner.set(key, scope);
    return storage.run(inner, () =>
      runHolding(holding, async (held) => {
        try {
          return await fn(held);
        } finally {
          for (const [, scope] of opened) scope.open = false; // closed before the release: nothing joins a lease being released
        }
      }),
    );
  }

  #storage(): AsyncLocalStorage<Scopes> {
    return (this.#scopes ??= new AsyncLocalStorage<Scopes>());
  }
}

/** A hold on `lease` when there is one to join. */
function entered(lease: Lease | undefined): Lease | undefined {
  return lease && enterLease(lease);
}
