import type { Counter, Histogram, Meter } from '@opentelemetry/api';
import type { LeaseLostError } from '../errors.js';
import type { AttributeSets } from './attribute-sets.js';
import type { AcquireOutcome, LeaseEnd, LockKind } from './types.js';

/** Bucket boundaries of the duration histograms, in seconds: 0.5 ms to a minute. */
const BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/** A manager's OpenTelemetry metrics: acquire and hold durations, contention, losses, renewals, quorum failures. */
export class LockMetrics {
  readonly #acquireDuration: Histogram;
  readonly #contended: Counter;
  readonly #holdDuration: Histogram;
  readonly #lost: Counter;
  readonly #renewal: Counter;
  readonly #quorumFailure: Counter;
  readonly #attributes: AttributeSets;

  constructor(meter: Meter, attributes: AttributeSets) {
    this.#attributes = attributes;
    const advice = { explicitBucketBoundaries: BUCKETS };
    this.#acquireDuration = meter.createHistogram('latchkey.acquire.duration', {
      description: 'How long acquires took, their wait included, by outcome.',
      unit: 's',
      advice,
    });
    this.#contended = meter.createCounter('latchkey.acquire.contended', {
      description: 'Acquires that found the lock held at their first look.',
      unit: '{acquire}',
    });
    this.#holdDuration = meter.createHistogram('latchkey.lease.hold.duration', {
      description: 'How long leases were held, until released or lost.',
      unit: 's',
      advice,
    });
    this.#lost = meter.createCounter('latchkey.lease.lost', { description: 'Leases lost, by reason.', unit: '{lease}' });
    this.#renewal = meter.createCounter('latchkey.lease.renewal', { description: 'Watchdog renewals, by outcome.', unit: '{renewal}' });
    this.#quorumFailure = meter.createCounter('latchkey.quorum.failure', {
      description: 'Redlock operations that reached no majority of the nodes.',
      unit: '{operation}',
    });
  }

  /** An acquire of `key` ended with `outcome` after `ms` ms. */
  acquireEnded(kind: LockKind, key: string, outcome: AcquireOutcome, ms: number, contended: boolean): void {
    this.#acquireDuration.record(ms / 1000, this.#attributes.of(kind, key, 'latchkey.outcome', outcome, contended));
    if (contended) this.#contended.add(1, this.#attributes.of(kind, key));
  }

  /** A lease on `key` held `held` ms ended: as `end` says, or `lost`. */
  leaseEnded(kind: LockKind, key: string, held: number, end: LeaseEnd, lost: LeaseLostError | undefined): void {
    this.#holdDuration.record(held / 1000, this.#attributes.of(kind, key, 'latchkey.lease.end', lost ? 'lost' : end));
    if (lost) this.#lost.add(1, this.#attributes.of(kind, key, 'latchkey.lost.reason', lost.reason));
  }

  /** A watchdog renewal of a lease on `key` ended. */
  renewal(kind: LockKind, key: string, ok: boolean): void {
    this.#renewal.add(1, this.#attributes.of(kind, key, 'latchkey.outcome', ok ? 'ok' : 'failed'));
  }

  /** Redlock reached no quorum on `operation` of `key`. */
  quorumFailed(kind: LockKind, key: string, operation: string): void {
    this.#quorumFailure.add(1, this.#attributes.of(kind, key, 'latchkey.operation', operation));
  }
}
