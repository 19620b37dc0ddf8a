import type { Backend, FencedValue } from './backend/backend.js';
import { createMemoryStore, memoryBackend, MemoryStore } from './backend/memory-store.js';
import { redisBackend } from './backend/redis-backend.js';
import { adaptClient, connectUrl } from './client/detect.js';
import { now, validUntil } from './clock.js';
import {
  ClosedError,
  InvalidOptionError,
  LockAbortedError,
  LockSuppressedError,
  LockTimeoutError,
  StaleFenceError,
} from './errors.js';
import { DEFAULT_PREFIX, lockKeys, type LockKeys } from './keys.js';
import { Lease, type LeaseContext } from './lease/lease.js';
import type { RenewOptions } from './lease/watchdog.js';
import { ACQUIRE_OPTIONS, LOCKS_OPTIONS, type AcquireOptions, type LocksOptions } from './options.js';
import { newToken } from './token.js';
import { sleep } from './wait/sleep.js';
import { checkStrategy, DEFAULT_TUNING, nextDelay, type WaitStrategyName, type WaitTuning } from './wait/strategy.js';
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
   */
  acquire(key: string, options?: AcquireOptions): Promise<Lease>;
  /** Tries once: resolves to a lease, or `null` when someone else holds the lock. */
  tryAcquire(key: string, options?: Omit<AcquireOptions, 'wait'>): Promise<Lease | null>;
  /**
   * Runs `fn` while holding `key`, renewing the lease by default, and releases it when `fn`
   * returns or throws. Rejects with `LeaseLostError` when the lease was lost before the release,
   * even if `fn` succeeded: its work was not fully protected.
   */
  withLock<T>(key: string, fn: (lease: Lease) => Promise<T> | T): Promise<T>;
  withLock<T>(key: string, options: AcquireOptions, fn: (lease: Lease) => Promise<T> | T): Promise<T>;
  /**
   * Writes `value` to the resource key `resource` only if `fence` (a number, or a lease's fence) is
   * at least the highest fence the resource has accepted; rejects with {@link StaleFenceError}
   * otherwise. The resource is stored as a hash `{ value, fence }` under your own key (no prefix).
   */
  fencedWrite(resource: string, value: string, fence: number | Lease): Promise<void>;
  /** Reads a resource written by {@link Locks.fencedWrite}; `null` if never written. */
  fencedRead(resource: string): Promise<FencedValue | null>;
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
}

/**
 * Creates a lock manager.
 *
 * @example
 * ```ts
 * import Redis from 'ioredis';
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
    prefix: o.prefix === undefined ? DEFAULT_PREFIX : checkPrefix(o.prefix),
    ttl: o.ttl === undefined ? 10_000 : checkTtl(o.ttl),
    wait: o.wait === undefined ? 10_000 : checkWait(o.wait),
    strategy: o.strategy === undefined ? 'notify' : checkStrategy(o.strategy),
    driftFactor: o.driftFactor === undefined ? 0.01 : checkFraction(o.driftFactor, 'driftFactor', 0.5),
    tuning: { ...DEFAULT_TUNING, ...(o.recheck === undefined ? {} : { recheck: checkRecheck(o.recheck) }) },
  };
  return new LockManager(chooseBackend(o), settings);
}

function checkRecheck(value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) {
    throw new InvalidOptionError('recheck', 'a positive integer number of milliseconds', value);
  }
  return value;
}

function chooseBackend(o: Partial<LocksOptions>): Backend {
  const given = (['redis', 'url', 'memory'] as const).filter((name) => o[name] !== undefined);
  if (given.length > 1) {
    throw new InvalidOptionError(given.join(' and '), 'only one of "redis", "url" or "memory"', `${given.length} of them`);
  }
  if (o.redis !== undefined) return redisBackend(adaptClient(o.redis));
  if (o.url !== undefined) {
    if (typeof o.url !== 'string' || !/^rediss?:\/\//.test(o.url)) {
      throw new InvalidOptionError('url', 'a redis:// or rediss:// URL', o.url);
    }
    const connecting = connectUrl(o.url);
    connecting.catch(() => {}); // reported by the first call that needs it
    return redisBackend(connecting);
  }
  if (o.memory !== undefined) {
    if (!(o.memory instanceof MemoryStore)) throw new InvalidOptionError('memory', 'a store from createMemoryStore()', o.memory);
    return memoryBackend(o.memory);
  }
  return memoryBackend(createMemoryStore());
}

class LockManager implements Locks {
  readonly #backend: Backend;
  readonly #settings: Settings;
  readonly #held = new Set<Lease>();
  /** Waits in progress, with their lock names, so `close()` can stop them. */
  readonly #waits = new Map<AbortController, string>();
  readonly #leaseContext: LeaseContext;
  #closed = false;

  constructor(backend: Backend, settings: Settings) {
    this.#backend = backend;
    this.#settings = settings;
    this.#leaseContext = {
      backend,
      driftFactor: settings.driftFactor,
      onEnd: (lease) => this.#held.delete(lease),
    };
  }

  get backend(): string {
    return this.#backend.name;
  }

  acquire(key: string, options?: AcquireOptions): Promise<Lease> {
    return this.#acquire(key, options, false) as Promise<Lease>;
  }

  tryAcquire(key: string, options?: Omit<AcquireOptions, 'wait'>): Promise<Lease | null> {
    return this.#acquire(key, options, true);
  }

  async withLock<T>(
    key: string,
    optionsOrFn: AcquireOptions | ((lease: Lease) => Promise<T> | T),
    maybeFn?: (lease: Lease) => Promise<T> | T,
  ): Promise<T> {
    const fn = typeof optionsOrFn === 'function' ? optionsOrFn : maybeFn;
    const options = typeof optionsOrFn === 'function' ? undefined : optionsOrFn;
    if (typeof fn !== 'function') throw new InvalidOptionError('fn', 'a function to run while the lock is held', fn);
    const lease = await this.acquire(key, { renew: true, ...options });
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

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const [wait, name] of this.#waits) wait.abort(new LockAbortedError(name, 'the manager was closed'));
    const releases = [...this.#held].map((lease) => lease.release().catch(() => {}));
    await Promise.all(releases);
    await this.#backend.close();
  }

  #assertOpen(): void {
    if (this.#closed) throw new ClosedError();
  }

  async #acquire(key: string, options: AcquireOptions | undefined, once: boolean): Promise<Lease | null> {
    this.#assertOpen();
    const name = checkKey(key);
    const o = checkOptions<AcquireOptions>(options, ACQUIRE_OPTIONS, 'options');
    const ttl = o.ttl === undefined ? this.#settings.ttl : checkTtl(o.ttl);
    const wait = once ? 0 : o.wait === undefined ? this.#settings.wait : checkWait(o.wait);
    const signal = checkSignal(o.signal);
    const strategy = o.strategy === undefined ? this.#settings.strategy : checkStrategy(o.strategy);
    const renew = checkRenew(o.renew);
    signal?.throwIfAborted();

    const keys = lockKeys(this.#settings.prefix, name);
    const token = newToken();
    const started = now();
    let attempts = 0;
    let unwatch: (() => void) | undefined;
    let woken = false;
    let wake: (() => void) | undefined;
    let controller: AbortController | undefined;
    const forward = (): void => controller?.abort(signal?.reason);
    try {
      for (;;) {
        const sentAt = now();
        attempts++;
        const reply = await this.#backend.acquire(keys, token, ttl).catch((error: unknown) => {
          // The script may have run with its reply lost: free the lock rather than orphan it until its TTL.
          this.#backend.release(keys, token).catch(() => {});
          throw error;
        });
        if (reply.acquired) {
          if (validUntil(sentAt, ttl, this.#settings.driftFactor) > now()) {
            return this.#lease(keys, token, reply.fence, ttl, sentAt, renew);
          }
          // The reply came so late that the lease has no validity left: give it back.
          await this.#backend.release(keys, token).catch(() => {});
        }
        const left = started + wait - now();
        if (left <= 0) {
          if (once) return null;
          throw new LockTimeoutError(name, now() - started, attempts);
        }
        if (!controller) {
          controller = new AbortController();
          this.#waits.set(controller, name);
          signal?.addEventListener('abort', forward, { once: true });
          if (this.#closed) controller.abort(new LockAbortedError(name, 'the manager was closed'));
        }
        controller.signal.throwIfAborted();
        if (strategy === 'notify' && !unwatch) {
          unwatch = await this.#backend.watchReleases(keys, () => {
            woken = true;
            wake?.();
          });
          continue; // the lock may have been released before the subscription was active
        }
        if (!woken) {
          const holderTtl = reply.acquired ? 0 : reply.ttl;
          const delay = Math.min(nextDelay(strategy, attempts - 1, holderTtl, this.#settings.tuning), left);
          await sleep(delay, controller.signal, (w) => (wake = w));
          wake = undefined;
        }
        woken = false;
        controller.signal.throwIfAborted();
      }
    } finally {
      unwatch?.();
      if (controller) {
        this.#waits.delete(controller);
        signal?.removeEventListener('abort', forward);
      }
    }
  }

  #lease(keys: LockKeys, token: string, fence: number, ttl: number, sentAt: number, renew: RenewOptions | undefined): Lease {
    const lease = new Lease(this.#leaseContext, keys, token, fence, ttl, sentAt, renew);
    this.#held.add(lease);
    if (this.#closed) void lease.release().catch(() => {});
    return lease;
  }
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
