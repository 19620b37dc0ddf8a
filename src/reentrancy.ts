import { AsyncLocalStorage } from 'node:async_hooks';
import { InvalidOptionError } from './errors.js';
import type { Lease } from './lease/lease.js';
import { runHolding } from './manager/run-holding.js';
import { checkRenew } from './manager/settings.js';
import { ACQUIRE_OPTIONS, type AcquireOptions } from './options.js';
import { checkOptions, checkSignal, checkTtl, checkWait } from './validate.js';
import { checkStrategy } from './wait/strategy.js';

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
 * The reentrant scopes of one manager: which locks a `withLock` of this async context holds, so
 * that a reentrant call of the same key joins the lease instead of waiting for itself.
 */
export class Reentrancy {
  /** Made by the first reentrant `withLock` (none on the default path). */
  #scopes: AsyncLocalStorage<Scopes> | undefined;

  /**
   * A reentrant call's hold on the lease of the open scope of this context that holds `name`;
   * undefined when there is none to join (the call then acquires as usual). A scope whose lease
   * was lost refuses with its LeaseLostError: the code inside is no longer protected.
   */
  join(name: string, options: AcquireOptions | undefined): Lease | undefined {
    const scope = this.#scopes?.getStore()?.get(name);
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

  /**
   * A reentrant `withLock`: joins the scope of this context that holds `name`, or acquires the
   * lock (with `acquire`) and runs `fn` in a new scope that records its lease.
   */
  async withLock<T>(name: string, options: AcquireOptions | undefined, fn: (lease: Lease) => Promise<T> | T, acquire: (name: string, options: AcquireOptions) => Promise<Lease>): Promise<T> {
    const storage = (this.#scopes ??= new AsyncLocalStorage<Scopes>());
    const scopes = storage.getStore();
    const joined = this.join(name, options);
    if (joined) return runHolding(joined, fn);
    const renew = checkRenew(options?.renew ?? true);
    const lease = await acquire(name, { ...options, renew: renew ?? false, reentrant: false });
    const scope: Scope = { lease, renewed: renew !== undefined, open: true };
    const inner = new Map(scopes).set(name, scope);
    return storage.run(inner, () =>
      runHolding(lease, async (held) => {
        try {
          return await fn(held);
        } finally {
          scope.open = false; // closed before the release: nothing joins a lease being released
        }
      }),
    );
  }
}
