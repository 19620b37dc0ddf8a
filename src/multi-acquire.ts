import { now, validUntil } from './clock.js';
import { InvalidOptionError, LockTimeoutError } from './errors.js';
import type { Lease } from './lease/lease.js';
import type { RenewOptions } from './lease/watchdog.js';
import type { LockWaits } from './lock-waits.js';
import type { ManagerContext } from './manager/context.js';
import { callSettings } from './manager/settings.js';
import { MultiLease } from './multi-lease.js';
import { ACQUIRE_OPTIONS, type AcquireOptions } from './options.js';
import { checkKey, checkOptions } from './validate.js';

/** What taking several locks needs from the manager: its per-key calls (observed, reentrant) and its locks' queues. */
export interface MultiAcquireContext {
  readonly ctx: ManagerContext;
  readonly locks: LockWaits;
  acquire(name: string, options: AcquireOptions): Promise<Lease>;
  tryAcquire(name: string, options: AcquireOptions): Promise<Lease | null>;
}

/**
 * Takes every key of `names`, all or nothing. First, when the backend can and no caller of this
 * process holds or waits for any of them, one atomic attempt for all ({@link acquireAtOnce}). Then
 * the ordered path: each key in the global order with the per-key machinery (local queues, the
 * backend's queue, notifications); on any failure, or an abort after the last key, the keys taken
 * so far are released.
 */
export async function acquireAll(m: MultiAcquireContext, names: unknown, options: AcquireOptions | undefined, once: boolean): Promise<MultiLease | null> {
  m.ctx.assertOpen();
  const sorted = checkKeySet(names);
  const o = checkOptions<AcquireOptions>(options, ACQUIRE_OPTIONS, 'options');
  const { ttl, wait, signal, strategy, renew } = callSettings(m.ctx.settings, o, once);
  signal?.throwIfAborted();
  const started = now();
  const deadline = started + wait;

  const atOnce = await acquireAtOnce(m, sorted, ttl, renew);
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
        const lease = once ? await m.tryAcquire(name, part) : await m.acquire(name, { ...part, wait: Math.max(0, Math.ceil(deadline - now())) });
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
    if (parts.every((p) => p.held)) return new MultiLease(parts, ttl);
    await releaseAll(parts);
    if (once) return null;
    if (deadline - now() <= 0) throw new LockTimeoutError(sorted.join(', '), now() - started, attempts);
  }
}

/**
 * One atomic attempt at every key, when the backend can take several in one step
 * (`Backend.acquireAll`) and no caller of this process holds or waits for any of them
 * (it would jump their queue). The parts, `null` when a key was busy, `undefined` when not tried.
 */
async function acquireAtOnce(m: MultiAcquireContext, names: readonly string[], ttl: number, renew: RenewOptions | undefined): Promise<Lease[] | null | undefined> {
  const { backend, lockKeys, tokens, driftFactor, observer } = m.ctx;
  const atomic = backend.acquireAll;
  if (!atomic) return undefined;
  const busyHere = (): boolean => names.some((name) => m.locks.busy(name));
  if (busyHere()) return undefined;
  const keys = names.map((name) => lockKeys.get(name));
  const token = tokens.next();
  const sentAt = now();
  let reply;
  try {
    reply = await atomic.call(backend, keys, token, ttl);
  } catch (error) {
    // The reply may be what was lost: give back whatever it took.
    for (const k of keys) backend.release(k, token).catch(() => {});
    throw error;
  }
  if (reply === undefined) return undefined;
  if (!reply.acquired) return null;
  if (validUntil(sentAt, ttl, driftFactor) <= now() || busyHere()) {
    // Too late to be of use, or another call of this process got in meanwhile: give them back.
    await Promise.all(keys.map((k) => backend.release(k, token).catch(() => {})));
    return undefined;
  }
  const leases = m.locks.leasesTogether(keys, token, reply.fences, ttl, sentAt, renew);
  if (observer) for (const lease of leases) observer.acquiredTogether(lease, sentAt);
  return leases;
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
