import { now, validUntil } from './clock.js';
import { settleBy } from './deadlines.js';
import { InvalidOptionError, LockAbortedError, LockTimeoutError, UnreachableError } from './errors.js';
import type { Lease } from './lease/lease.js';
import type { LockWaits } from './lock-waits.js';
import type { ManagerContext } from './manager/context.js';
import { callSettings, type CallSettings } from './manager/settings.js';
import { MultiLease } from './multi-lease.js';
import { ACQUIRE_OPTIONS, type AcquireOptions } from './options.js';
import { checkKey, checkOptions } from './validate.js';
import { ATTEMPT_GRACE, TRY_BOUND } from './wait/attempt.js';

/** An attempt in flight that `close()` ends at once (see {@link MultiAcquireContext.inFlight}). */
export interface StoppableAttempt {
  cancel: ((reason: unknown) => void) | undefined;
  /** The locks it is for, as an error names them. */
  readonly names: string;
}

/** What taking several locks needs from the manager: its per-key calls (observed), its locks' queues, and its reentrant scopes. */
export interface MultiAcquireContext {
  readonly ctx: ManagerContext;
  readonly locks: LockWaits;
  acquire(name: string, options: AcquireOptions): Promise<Lease>;
  tryAcquire(name: string, options: AcquireOptions): Promise<Lease | null>;
  /**
   * The holds a reentrant call takes, by name, on the scopes of its context that hold some of
   * `names` (they are not acquired again); throws when a scope refuses (its lease was lost). Empty
   * for a call that is not reentrant.
   */
  join(names: readonly string[], options: AcquireOptions): ReadonlyMap<string, Lease>;
  /** The one-step attempts in flight: the manager's `close()` stops each with a LockAbortedError. */
  readonly inFlight: Set<StoppableAttempt>;
}

/**
 * Takes every key of `names`, all or nothing. A reentrant call first joins the keys that scopes
 * of its context hold (`join`). The others: first, when the backend can and no caller of this
 * process holds or waits for any of them, one atomic attempt for all ({@link acquireAtOnce}).
 * Then the ordered path: each key in the global order with the per-key machinery (local queues,
 * the backend's queue, notifications); on any failure, or an abort after the last key, the keys
 * taken (and joined) so far are released. `renewByDefault` (withLocks): the parts taken are
 * renewed unless the caller says otherwise; unlike the caller's own `renew`, this is no request
 * a joined scope has to meet.
 */
export async function acquireAll(m: MultiAcquireContext, names: unknown, options: AcquireOptions | undefined, once: boolean, renewByDefault = false): Promise<MultiLease | null> {
  m.ctx.assertOpen();
  const started = now();
  const sorted = checkKeySet(names);
  const o = checkOptions<AcquireOptions>(options, ACQUIRE_OPTIONS, 'options');
  const call = callSettings(m.ctx.settings, renewByDefault && o.renew === undefined ? { ...o, renew: true } : o, once);
  if (call.signal?.aborted) {
    m.ctx.observer?.failedTogether(sorted, started, call.signal.reason, call.signal); // as a single acquire's is recorded
    throw call.signal.reason;
  }
  const joined = m.join(sorted, o);
  const rest = sorted.filter((name) => !joined.has(name));
  let taken: Lease[] | null;
  try {
    taken = rest.length === 0 ? [] : await takeAll(m, rest, call, once);
  } catch (error) {
    await releaseAll([...joined.values()]);
    throw error;
  }
  const parts = new Map([...joined, ...(taken ?? []).map((part) => [part.key, part] as const)]);
  // A scope's lease that ended while the others were taken: lost (its loss is the answer), or
  // released by its scope (the key is free, or someone else's, now: the whole is not had).
  const ended = [...joined.values()].find((part) => part.state !== 'held');
  if (!taken || ended) {
    await releaseAll([...parts.values()]);
    if (ended?.lostError) throw ended.lostError;
    if (!ended || once) return null;
    // Its scope released it: that key is taken as usual now (no scope holds it), from the start
    // and in the global order, with what is left of the wait.
    return acquireAll(m, sorted, { ...o, wait: waitLeft(started + call.wait) }, once, renewByDefault);
  }
  return new MultiLease(sorted.map((name) => parts.get(name)!), call.ttl);
}

/** Takes every key of `names` (none held by a scope of the caller): at once when they are free, else one by one in the global order. */
async function takeAll(m: MultiAcquireContext, sorted: readonly string[], call: CallSettings, once: boolean): Promise<Lease[] | null> {
  const { ttl, wait, signal, strategy, renew } = call;
  const started = now();
  const deadline = started + wait;

  const { observer } = m.ctx;
  let atOnce: Lease[] | null | undefined;
  try {
    atOnce = await acquireAtOnce(m, sorted, call, once ? started + Math.min(ttl, TRY_BOUND) : deadline);
  } catch (error) {
    observer?.failedTogether(sorted, started, error, signal);
    throw error;
  }
  if (signal?.aborted) {
    if (!atOnce) observer?.failedTogether(sorted, started, signal.reason, signal);
    await releaseAll(atOnce ?? []);
    throw signal.reason;
  }
  if (atOnce) return atOnce;
  if (atOnce === null && once) {
    observer?.failedTogether(sorted, started, undefined, signal);
    return null;
  }

  // The scopes were decided by the caller (`join`): each part is a plain acquire.
  const part: AcquireOptions = { ttl, strategy, renew: renew ?? false, reentrant: false, ...(signal ? { signal } : {}) };
  let attempts = 0;
  for (;;) {
    attempts++;
    const parts: Lease[] = [];
    try {
      for (const name of sorted) {
        const lease = once ? await m.tryAcquire(name, part) : await m.acquire(name, { ...part, wait: waitLeft(deadline) });
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
    if (signal?.aborted) {
      // Aborted while the last part was being taken: the caller is gone, and must not get the whole.
      await releaseAll(parts);
      throw signal.reason;
    }
    if (parts.every((p) => p.held)) return parts;
    await releaseAll(parts);
    if (once) return null;
    if (deadline - now() <= 0) throw new LockTimeoutError(sorted.join(', '), now() - started, attempts);
  }
}

/**
 * One atomic attempt at every key, when the backend can take several in one step
 * (`Backend.acquireAll`) and no caller of this process holds or waits for any of them
 * (it would jump their queue). The parts, `null` when a key was busy, `undefined` when not tried.
 * Bounded as a single attempt is (see `attempt`): by `deadline` (plus a grace for a reply on its
 * way), the caller's signal and the manager's `close()`, whatever the client's retries; a reply
 * that comes after that, or is lost, has whatever it took given back.
 */
async function acquireAtOnce(m: MultiAcquireContext, names: readonly string[], call: CallSettings, deadline: number): Promise<Lease[] | null | undefined> {
  const { ttl, renew, signal } = call;
  const { backend, lockKeys, tokens, driftFactor, observer } = m.ctx;
  const atomic = backend.acquireAll;
  if (!atomic) return undefined;
  const busyHere = (): boolean => names.some((name) => m.locks.busy(name));
  if (busyHere()) return undefined;
  const keys = names.map((name) => lockKeys.get(name));
  const token = tokens.next();
  const sentAt = now();
  /** Releases whatever the attempt took (errors dropped: a key not released expires by its TTL). */
  const giveBack = (): Promise<unknown> => Promise.all(keys.map((k) => backend.release(k, token).catch(() => {})));
  const stop: StoppableAttempt = { cancel: undefined, names: names.join(', ') };
  const onAbort = (): void => stop.cancel?.(signal!.reason);
  let reply;
  try {
    const sending = atomic.call(backend, keys, token, ttl);
    if (backend.boundsCalls) {
      reply = await sending;
    } else {
      m.inFlight.add(stop);
      signal?.addEventListener('abort', onAbort, { once: true });
      const at = deadline === Infinity ? Infinity : Math.max(deadline, sentAt + ATTEMPT_GRACE);
      reply = await settleBy(sending, at, () => new UnreachableError('acquireAll', `an attempt at locks "${stop.names}"`, backend.server, now() - sentAt, backend.lastError?.()), {
        late: (late) => {
          if (late?.acquired) void giveBack(); // ended before it came
        },
        stoppable: stop,
      });
    }
  } catch (error) {
    // The reply may be what was lost: give back whatever it took.
    void giveBack();
    throw error;
  } finally {
    m.inFlight.delete(stop);
    signal?.removeEventListener('abort', onAbort);
  }
  if (reply === undefined) return undefined;
  if (!reply.acquired) return null;
  if (m.ctx.isClosed()) {
    // The manager closed while the attempt was in flight: the caller must not be told it holds
    // the locks (a wait ended by close() rejects), and they are given back.
    await giveBack();
    throw new LockAbortedError(stop.names, 'the manager was closed');
  }
  if (validUntil(sentAt, ttl, driftFactor) <= now() || busyHere()) {
    // Too late to be of use, or another call of this process got in meanwhile: give them back.
    await giveBack();
    return undefined;
  }
  const leases = m.locks.leasesTogether(keys, token, reply.fences, ttl, sentAt, renew);
  if (observer) for (const lease of leases) observer.acquiredTogether(lease, sentAt);
  return leases;
}

/** What is left of a wait until `deadline` (monotonic ms), as a call's `wait`: whole ms, never negative. */
function waitLeft(deadline: number): number {
  return Math.max(0, Math.ceil(deadline - now()));
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
