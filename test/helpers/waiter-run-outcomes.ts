/**
 * The checks on each call of a waiter run (waiter-run.ts) as it settles, and the leases it got:
 * mutual exclusion and fence order at each grant, an outcome its call allows, settled within its
 * due time and the grace; and which errors a release or an extend of a lease may end with.
 */
import {
  ClosedError,
  LeaseLostError,
  LeaseReleasedError,
  LockAbortedError,
  LockTimeoutError,
  UnreachableError,
  type Lease,
} from '../../src/index.js';
import { describeError, GRACE_MS, type Call, type Held } from './waiter-run-calls.js';

export class Outcomes {
  /** Every lease granted, in grant order. */
  readonly held: Held[] = [];
  readonly #lastFence = new Map<string, number>();
  /** Every fence granted, per resource (fences are per lock: two locks may issue the same one). */
  readonly #fences = new Map<string, Set<number>>();
  readonly #closedAt: readonly (number | undefined)[];
  readonly #stallMs: number;
  readonly #violation: (text: string) => void;

  /** `closedAt`: when each manager was closed (the run's own array, kept up to date by the run). */
  constructor(closedAt: readonly (number | undefined)[], stallMs: number, violation: (text: string) => void) {
    this.#closedAt = closedAt;
    this.#stallMs = stallMs;
    this.#violation = violation;
  }

  resolved(call: Call, value: Lease | null): void {
    this.#settledAt(call);
    if (value === null) {
      if (!call.once) this.#violation(`${call.label} resolved to null: only a try may`);
      return;
    }
    const now = performance.now();
    const live = this.held.filter((held) => held.call.resource === call.resource && !held.released && held.lease.validUntil > now);
    if (live.length >= call.limit) {
      const holders = live.map((held) => `${held.call.label} (fence ${held.lease.fence}, valid ${Math.round(held.lease.validUntil - now)} ms more)`);
      this.#violation(`mutual exclusion: ${call.label} was granted ${call.resource} (fence ${value.fence}) while ${holders.join(' and ')} held it`);
    }
    if (call.limit === 1) {
      const last = this.#lastFence.get(call.resource);
      if (last !== undefined && value.fence <= last) this.#violation(`fence order: ${call.label} got fence ${value.fence}, not above the last grant's ${last}`);
      this.#lastFence.set(call.resource, Math.max(last ?? 0, value.fence));
    }
    const fences = this.#fences.get(call.resource) ?? new Set<number>();
    if (fences.has(value.fence)) this.#violation(`fence ${value.fence} of ${call.label} was issued twice for ${call.resource}`);
    this.#fences.set(call.resource, fences.add(value.fence));
    // A lease that comes after its manager was closed is released by the manager itself.
    this.held.push({ call, lease: value, released: this.#closedAt[call.m] !== undefined });
  }

  rejected(call: Call, error: unknown): void {
    this.#settledAt(call);
    if (call.reason !== undefined && error === call.reason && call.abortedAt !== undefined) return;
    if (error instanceof LockTimeoutError && !call.once) return;
    // A call none of whose attempts got a reply while the server was stalled: Redis did not answer (issue 18).
    if (error instanceof UnreachableError && this.#stallMs > 0) return;
    if (error instanceof ClosedError && call.afterClose) return;
    if (error instanceof LockAbortedError && this.#closedAt[call.m] !== undefined) return;
    this.#violation(`${call.label} rejected with ${describeError(error)}${call.reason && error !== call.reason ? ' (not its abort reason)' : ''}`);
  }

  #settledAt(call: Call): void {
    const at = performance.now();
    call.settledAt = at;
    const late = at - this.dueBy(call);
    if (late > GRACE_MS + this.#stallMs) this.#violation(`${call.label} settled ${Math.round(late)} ms after it was due`);
  }

  /** When a call should have settled, grace aside: at its wait's end, its abort, or its manager's close, whichever came first. */
  dueBy(call: Call): number {
    const closed = this.#closedAt[call.m] ?? Infinity;
    return Math.min(call.started + call.wait, call.abortedAt ?? Infinity, Math.max(closed, call.started));
  }

  leaseError(what: string, error: unknown, extend: boolean): void {
    if (error instanceof LeaseLostError) return;
    if (extend && error instanceof LeaseReleasedError) return;
    this.#violation(`${what} rejected with ${describeError(error)}`);
  }
}
