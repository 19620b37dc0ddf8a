import { now, validUntil } from './clock.js';
import { InvalidOptionError, LockAbortedError, UnsupportedError } from './errors.js';
import { semaphoreKeys, type LockKeys, type SemaphoreKind } from './keys.js';
import { Lease } from './lease/lease.js';
import type { RenewOptions } from './lease/watchdog.js';
import type { ManagerContext } from './manager/context.js';
import { runHolding, splitCallback } from './manager/run-holding.js';
import { callSettings, checkCount } from './manager/settings.js';
import type { AcquireTrace } from './observe/observer.js';
import type { LockKind } from './observe/types.js';
import { ACQUIRE_OPTIONS, type AcquireOptions } from './options.js';
import type { PermitOptions, Semaphore, SemaphoreOptions } from './semaphore.js';
import { checkOptions, checkTtl, checkWait } from './validate.js';
import { checkStrategy } from './wait/strategy.js';
import { attempt, onceLimit } from './wait/attempt.js';
import type { Grant } from './wait/wait-context.js';
import { Waiter } from './wait/waiter.js';

const PERMIT_OPTIONS = [...ACQUIRE_OPTIONS.filter((option) => option !== 'reentrant'), 'permits'] as const;

/**
 * The permit waits of one manager: semaphores, and the read-write and fair locks built on them.
 * Unlike a lock's callers, a semaphore's callers in one process do not queue in memory behind
 * each other (several may hold permits at once): each queues in the backend, first come, first
 * served, and is woken by releases through the manager's inbox.
 */
export class Permits {
  readonly #ctx: ManagerContext;
  /** Waits in progress, for `close()`. */
  readonly #waiters = new Set<Waiter>();

  constructor(ctx: ManagerContext) {
    this.#ctx = ctx;
  }

  /** A semaphore handle: the permits of `name` under the key kind `kind` ("sem"; "rw" for a read-write lock; "fair" for a fair lock). */
  semaphore(name: string, limit: number, kind: SemaphoreKind, o: Partial<SemaphoreOptions>): Semaphore {
    const ctx = this.#ctx;
    if (!ctx.backend.semaphores) {
      throw new UnsupportedError(
        `a ${kind === 'rw' ? 'read-write lock' : kind === 'fair' ? 'fair lock' : 'semaphore'} on ${ctx.backend.name}`,
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
      if (!keys) keyCache.set(permits, (keys = semaphoreKeys(ctx.settings.prefix, name, { limit, permits }, kind)));
      return keys;
    };
    const observedKind: LockKind = kind === 'rw' ? 'read-write' : kind === 'fair' ? 'fair' : 'semaphore';
    const acquire = (options: PermitOptions | undefined, once: boolean): Promise<Lease | null> => {
      let given: PermitOptions;
      try {
        given = { ...defaults, ...checkOptions<PermitOptions>(options, PERMIT_OPTIONS, 'options') };
      } catch (error) {
        return Promise.reject(error); // bad options reject, as every acquire's do
      }
      const observer = ctx.observer;
      if (!observer) return this.#acquire(keysFor, limit, given, once);
      const t = observer.start(observedKind, name);
      return observer.track(t, this.#acquire(keysFor, limit, given, once, t), given.signal);
    };
    return {
      name,
      limit,
      acquire: (options) => acquire(options, false) as Promise<Lease>,
      tryAcquire: (options) => acquire(options, true),
      withPermit: async <T>(optionsOrFn: PermitOptions | ((lease: Lease) => Promise<T> | T), maybeFn?: (lease: Lease) => Promise<T> | T) => {
        const { options, fn } = splitCallback(optionsOrFn, maybeFn, 'the permits are held');
        return runHolding((await acquire({ renew: true, ...options }, false))!, fn);
      },
    };
  }

  /** Stops every wait (they reject with a LockAbortedError); resolves once every waiter has left. */
  stopAll(): Promise<unknown> {
    const left: Promise<void>[] = [];
    for (const waiter of this.#waiters) {
      waiter.requestStop(new LockAbortedError(waiter.keys.name, 'the manager was closed'));
      left.push(waiter.whenDone());
    }
    return Promise.all(left);
  }

  /** One semaphore acquire: the permits at once when they are free; else a wait in the backend's queue. */
  async #acquire(keysFor: (permits: number) => LockKeys, limit: number, o: PermitOptions, once: boolean, trace?: AcquireTrace): Promise<Lease | null> {
    const ctx = this.#ctx;
    ctx.assertOpen();
    const { ttl, wait, signal, strategy, renew } = callSettings(ctx.settings, o, once);
    const permits = o.permits === undefined ? 1 : checkCount(o.permits, 'permits', 1, 'a positive integer number of permits');
    if (permits > limit) throw new InvalidOptionError('permits', `at most the semaphore's limit (${limit})`, permits);
    signal?.throwIfAborted();
    const keys = keysFor(permits);
    const token = ctx.tokens.next();
    const started = now();
    if (once) {
      const reply = await attempt(ctx.backend, keys, token, ttl, undefined, onceLimit(keys, ttl, ctx.backend));
      if (reply.acquired && validUntil(started, ttl, ctx.driftFactor) > now()) {
        return this.#lease(keys, token, ttl, renew, { fence: reply.fence, sentAt: started, replicated: reply.replicated });
      }
      if (reply.acquired) await ctx.backend.release(keys, token).catch(() => {}); // too late to be of use
      if (trace) trace.contended = true;
      return null;
    }
    const waiter = new Waiter(ctx, { keys, member: ctx.nextMember(), token, ttl, renew, strategy, started, deadline: started + wait, state: 'active' });
    ctx.lastMade.waiter = waiter;
    waiter.listenTo(signal, (reason) => waiter.requestStop(reason));
    this.#waiters.add(waiter);
    try {
      // The first attempt queues at once when the inbox already listens for this semaphore
      // (another wait of this manager opened it): a wake-up can reach it, and waiting costs no extra attempt.
      const first = await waiter.attempt();
      let grant = waiter.won(first);
      if (!grant) {
        if (trace && !first.reply.acquired) trace.contended = true;
        grant = await waiter.waitRemotely(first.reply.acquired ? undefined : first);
      }
      waiter.exit(true);
      const lease = this.#lease(keys, token, ttl, renew, grant);
      if (waiter.stop) {
        // Stopped between the win and now (an abort, close()): the permits are given back, as a
        // lock's lease is (LockWaits.#serve), and the caller gets the stop's reason.
        lease.release().catch(() => {});
        throw waiter.stop.reason;
      }
      return lease;
    } catch (error) {
      waiter.exit(false);
      throw error;
    } finally {
      this.#waiters.delete(waiter);
    }
  }

  #lease(keys: LockKeys, token: string, ttl: number, renew: RenewOptions | undefined, grant: Grant): Lease {
    const ctx = this.#ctx;
    const lease = new Lease(ctx.leaseContext, keys, token, grant.fence, ttl, grant.sentAt, renew, grant.replicated);
    ctx.lastMade.lease = lease;
    ctx.held.add(lease);
    if (renew) lease.watchExpiry();
    if (ctx.isClosed()) void lease.release().catch(() => {});
    else ctx.holders.touch();
    return lease;
  }
}
