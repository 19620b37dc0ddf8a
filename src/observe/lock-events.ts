import type { EvictionPolicyReport } from '../backend/eviction-policy.js';
import type { QuorumOutcome } from '../backend/quorum.js';
import type { LeaseLostError } from '../errors.js';
import type { Lease } from '../lease/lease.js';
import { errorSummary } from './error-fields.js';
import type { AcquiredEvent, AcquireOutcome, EvictionPolicyEvent, LeaseEnd, LockEventBase, LockHooks, LockKind, Logger, LostEvent, ReleasedEvent } from './types.js';

/**
 * A manager's lock events as log records and hook calls. A hook that throws is logged and
 * otherwise ignored. Nothing is built for an event that neither the logger nor a hook takes.
 */
export class LockEvents {
  readonly #prefix: string;
  readonly #backend: string;
  readonly #logger: Logger | undefined;
  readonly #hooks: LockHooks | undefined;

  constructor(prefix: string, backend: string, logger: Logger | undefined, hooks: LockHooks | undefined) {
    this.#prefix = prefix;
    this.#backend = backend;
    this.#logger = logger;
    this.#hooks = hooks;
  }

  /** An acquire of `key` got a lease with fence `fence` after `ms` ms. */
  acquired(kind: LockKind, key: string, fence: number, ms: number, contended: boolean): void {
    const logger = this.#logger;
    const hook = this.#hooks?.acquired;
    if (!logger && !hook) return;
    const event: AcquiredEvent = { key, kind, prefix: this.#prefix, backend: this.#backend, fence, duration: ms, contended };
    logger?.debug({ latchkey: 'acquired', ...event }, `latchkey: acquired "${key}"`);
    if (hook) this.#call('acquired', hook, event);
  }

  /** An acquire of `key` ended without a lease after `ms` ms: `outcome`, and `error` if it rejected. */
  acquireFailed(kind: LockKind, key: string, outcome: Exclude<AcquireOutcome, 'acquired'>, ms: number, contended: boolean, error: unknown): void {
    const base = this.#base(kind, key);
    const record = { latchkey: 'acquireFailed', ...base, outcome, duration: ms, contended, ...(error === undefined ? {} : { err: errorSummary(error) }) };
    const message = `latchkey: acquire of "${key}" ended: ${outcome}`;
    if (outcome === 'error') this.#logger?.error(record, message);
    else if (outcome === 'busy') this.#logger?.debug(record, message);
    else this.#logger?.info(record, message);
    if (this.#hooks?.acquireFailed) {
      const event = { ...base, outcome, duration: ms, contended, ...(error === undefined ? {} : { error }) };
      this.#call('acquireFailed', this.#hooks.acquireFailed, event);
    }
  }

  /** `lease`, held `held` ms, was released, or `lost`. */
  leaseEnded(kind: LockKind, lease: Lease, held: number, end: LeaseEnd, lost: LeaseLostError | undefined): void {
    const logger = this.#logger;
    if (lost) {
      const hook = this.#hooks?.lost;
      if (!logger && !hook) return;
      const event: LostEvent = { ...this.#base(kind, lease.key), fence: lease.fence, held, reason: lost.reason, error: lost };
      logger?.warn(
        { latchkey: 'lost', ...this.#base(kind, lease.key), fence: lease.fence, held, reason: lost.reason, err: errorSummary(lost) },
        `latchkey: lease on "${lease.key}" lost: ${lost.reason}`,
      );
      if (hook) this.#call('lost', hook, event);
      return;
    }
    const hook = this.#hooks?.released;
    if (!logger && !hook) return;
    const event: ReleasedEvent = { key: lease.key, kind, prefix: this.#prefix, backend: this.#backend, fence: lease.fence, held, end };
    logger?.debug({ latchkey: 'released', ...event }, end === 'expired' ? `latchkey: "${lease.key}" expired, as it was left to` : `latchkey: released "${lease.key}"`);
    if (hook) this.#call('released', hook, event);
  }

  /** A watchdog renewal of `lease` ended: `error` undefined when it succeeded. */
  renewal(kind: LockKind, lease: Lease, error: unknown): void {
    const logger = this.#logger;
    if (error === undefined) {
      // Hot: a manager that holds many leases renews tens of thousands a second.
      const hook = this.#hooks?.renewed;
      if (!logger && !hook) return;
      const event = { ...this.#base(kind, lease.key), fence: lease.fence };
      logger?.debug({ latchkey: 'renewed', ...event }, `latchkey: renewed "${lease.key}"`);
      if (hook) this.#call('renewed', hook, event);
      return;
    }
    const base = this.#base(kind, lease.key);
    logger?.warn(
      { latchkey: 'renewFailed', ...base, fence: lease.fence, err: errorSummary(error) },
      `latchkey: renewal of "${lease.key}" failed`,
    );
    if (this.#hooks?.renewFailed) {
      const event = { ...base, fence: lease.fence, error };
      this.#call('renewFailed', this.#hooks.renewFailed, event);
    }
  }

  /** Redlock reached no quorum on an operation on `key`. */
  quorumFailed(kind: LockKind, key: string, outcome: QuorumOutcome): void {
    const base = this.#base(kind, key);
    this.#logger?.warn(
      { latchkey: 'quorumFailed', ...base, operation: outcome.operation, quorum: outcome.quorum, for: outcome.for, against: outcome.against, errors: outcome.errors },
      `latchkey: ${outcome.operation} of "${key}" reached no quorum`,
    );
    if (this.#hooks?.quorumFailed) {
      const event = { ...base, operation: outcome.operation, outcome };
      this.#call('quorumFailed', this.#hooks.quorumFailed, event);
    }
  }

  /** The start-up check of a server's eviction policy came back: a warning when it can evict lock keys. */
  evictionPolicy(report: EvictionPolicyReport, node: string | undefined): void {
    if (!report.evictsLockKeys || report.policy === null) return;
    const event: EvictionPolicyEvent = {
      prefix: this.#prefix,
      backend: this.#backend,
      ...(node === undefined ? {} : { node }),
      policy: report.policy,
      maxmemory: report.maxmemory,
    };
    this.#logger?.warn(
      { latchkey: 'evictionPolicy', ...event },
      `latchkey: Redis${node === undefined ? '' : ` ${node}`} has maxmemory-policy ${report.policy}, which can evict lock keys and let a second holder in; use noeviction (docs/operations.md, "Eviction")`,
    );
    if (this.#hooks?.evictionPolicy) this.#call('evictionPolicy', this.#hooks.evictionPolicy, event);
  }

  #base(kind: LockKind, key: string): LockEventBase {
    return { key, kind, prefix: this.#prefix, backend: this.#backend };
  }

  #call<E>(hook: string, fn: (event: E) => void, event: E): void {
    try {
      fn(event);
    } catch (error) {
      this.#logger?.warn({ latchkey: 'hookFailed', hook, err: errorSummary(error) }, `latchkey: hook "${hook}" threw`);
    }
  }
}
