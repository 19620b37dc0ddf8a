import { context, SpanStatusCode, trace, type Span, type Tracer } from '@opentelemetry/api';
import type { LeaseLostError } from '../errors.js';
import type { Lease } from '../lease/lease.js';
import type { AttributeSets } from './attribute-sets.js';
import { errorType } from './error-fields.js';
import type { AcquireOutcome, LeaseEnd, LockKind } from './types.js';

/**
 * A manager's OpenTelemetry spans: `latchkey.acquire` for each acquire, `latchkey.hold` for each
 * lease from its grant to its release or loss, and `latchkey.release`, a child of the hold.
 */
export class LockSpans {
  readonly #tracer: Tracer;
  readonly #attributes: AttributeSets;
  /** The `latchkey.hold` span of each lease held, from its grant to its release or loss. */
  readonly #holds = new WeakMap<Lease, Span>();
  /**
   * The `latchkey.release` spans whose reply found the lease gone or taken: the lease looks up
   * why (a forced release leaves a note) before it ends, and its end finishes them, with that
   * reason, just before its hold span.
   */
  readonly #releasesLost = new WeakMap<Lease, () => void>();

  constructor(tracer: Tracer, attributes: AttributeSets) {
    this.#tracer = tracer;
    this.#attributes = attributes;
  }

  /** The `latchkey.acquire` span of an acquire of `key` that starts. */
  startAcquire(kind: LockKind, key: string): Span {
    return this.#tracer.startSpan('latchkey.acquire', { attributes: { ...this.#attributes.of(kind, key) } });
  }

  /** `lease` was granted: its `latchkey.hold` span starts. */
  startHold(kind: LockKind, lease: Lease): void {
    const span = this.#tracer.startSpan('latchkey.hold', { attributes: { ...this.#attributes.of(kind, lease.key) } });
    span.setAttribute('latchkey.fence', lease.fence);
    this.#holds.set(lease, span);
  }

  /** `lease` was released, or `lost`: its `latchkey.hold` span ends. */
  endHold(lease: Lease, end: LeaseEnd, lost: LeaseLostError | undefined): void {
    const release = this.#releasesLost.get(lease);
    if (release) {
      this.#releasesLost.delete(lease);
      release();
    }
    const span = this.#holds.get(lease);
    if (!span) return;
    this.#holds.delete(lease);
    span.setAttribute('latchkey.lease.end', lost ? 'lost' : end);
    if (lost) {
      span.setAttributes({ 'latchkey.lost.reason': lost.reason, 'error.type': lost.code });
      span.setStatus({ code: SpanStatusCode.ERROR, message: `lease lost: ${lost.reason}` });
    }
    span.end();
  }

  /** A watchdog renewal of `lease` ended (`error` undefined when it succeeded): an event on its hold span. */
  renewal(lease: Lease, error: unknown): void {
    this.#holds.get(lease)?.addEvent(
      error === undefined ? 'latchkey.renewed' : 'latchkey.renew_failed',
      error === undefined ? undefined : { 'error.type': errorType(error) },
    );
  }

  /**
   * Runs the release of `lease` (`release`) as a `latchkey.release` span, a child of the lease's
   * `latchkey.hold` span: the round trip, its outcome (`released`, or `lost` with the reason the
   * lease was lost for before the release, or else the one the reply gave), and status error when
   * it failed.
   */
  async traceRelease<R>(kind: LockKind, lease: Lease, release: () => Promise<R>): Promise<R> {
    const hold = this.#holds.get(lease);
    const parent = hold ? trace.setSpan(context.active(), hold) : context.active();
    const span = this.#tracer.startSpan('latchkey.release', { attributes: { ...this.#attributes.of(kind, lease.key) } }, parent);
    let reply: R;
    try {
      reply = await release();
    } catch (error) {
      span.setAttributes({ 'latchkey.outcome': 'error', 'error.type': errorType(error) });
      span.setStatus({ code: SpanStatusCode.ERROR, message: errorType(error) });
      span.end();
      throw error;
    }
    // A lease lost first (its validity ran out) is reported lost by its release, whatever the reply.
    const replied = typeof reply === 'string' && reply !== 'ok' ? reply : undefined;
    const finish = (): void => {
      const lost = lease.lostError?.reason ?? replied;
      span.setAttribute('latchkey.outcome', lost ? 'lost' : 'released');
      if (lost) span.setAttribute('latchkey.lost.reason', lost);
      span.end();
    };
    // Gone or taken, and not lost before: the lease's end says why (forced, or not).
    if (replied && !lease.lostError) this.#releasesLost.set(lease, finish);
    else finish();
    return reply;
  }
}

/** Ends the `latchkey.acquire` span of an acquire that got a lease with fence `fence` (`reentrant`: by joining its scope's lease). */
export function endAcquired(span: Span, contended: boolean, fence: number, reentrant = false): void {
  span.setAttributes({ 'latchkey.outcome': 'acquired', 'latchkey.contended': contended, 'latchkey.fence': fence });
  if (reentrant) span.setAttribute('latchkey.reentrant', true);
  span.end();
}

/** Ends the `latchkey.acquire` span of an acquire that ended without a lease: `outcome`, and `error` if it rejected. */
export function endFailed(span: Span, outcome: Exclude<AcquireOutcome, 'acquired'>, contended: boolean, error: unknown): void {
  span.setAttributes({ 'latchkey.outcome': outcome, 'latchkey.contended': contended });
  if (error !== undefined) span.setAttribute('error.type', errorType(error));
  // Not the error's message: it names the lock.
  if (outcome === 'error' || outcome === 'timeout') span.setStatus({ code: SpanStatusCode.ERROR, message: error === undefined ? outcome : errorType(error) });
  span.end();
}
