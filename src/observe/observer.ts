import type { Span } from '@opentelemetry/api';
import type { EvictionPolicyReport } from '../backend/eviction-policy.js';
import type { QuorumOutcome } from '../backend/quorum.js';
import { now } from '../clock.js';
import { ClosedError, InvalidOptionError, LockAbortedError, LockTimeoutError, QuorumError } from '../errors.js';
import type { Lease } from '../lease/lease.js';
import { AttributeSets } from './attribute-sets.js';
import { LockEvents } from './lock-events.js';
import { LockMetrics } from './lock-metrics.js';
import { endAcquired, endFailed, LockSpans } from './lock-spans.js';
import { observerSettings, SCOPE, type ObserverSettings } from './observer-options.js';
import type { AcquireOutcome, LockKind, ObservabilityOptions } from './types.js';

/** One acquire being watched: made when it starts, finished with its outcome. */
export interface AcquireTrace {
  readonly kind: LockKind;
  readonly key: string;
  readonly started: number;
  /** Set by the manager when the lock was held at the first look. */
  contended: boolean;
  /** Set by the manager when the call joined a reentrant scope's lease: not an acquire of the lock, not recorded. */
  joined: boolean;
  readonly span: Span | undefined;
}

/**
 * Checks a manager's observability options at once (an InvalidOptionError before the manager
 * opens any connection), and returns what builds its observer once the backend is known: the
 * observer, or undefined when nothing listens (no logger, no hooks, no providers given, no SDK
 * registered globally): the manager then skips every instrumentation point.
 */
export function observerFor(o: ObservabilityOptions, prefix: string): (backend: string) => Observer | undefined {
  const settings = observerSettings(o, prefix, '');
  return (backend) => settings && new Observer({ ...settings, backend });
}

/**
 * Records a manager's lock events as metrics, spans, hook calls and log records. Each of these
 * channels is a room of its own, made only when something listens on it: a channel nobody set
 * costs one check per event and allocates nothing.
 */
export class Observer {
  readonly #metrics: LockMetrics | undefined;
  readonly #spans: LockSpans | undefined;
  /** Log records and hook calls. */
  readonly #events: LockEvents | undefined;
  /** Kinds of the leases that are not plain locks (permits of a semaphore, read-write or fair lock). */
  readonly #kinds = new WeakMap<Lease, LockKind>();

  constructor(s: ObserverSettings) {
    const attributes = new AttributeSets(s.prefix, s.backend, s.keyGroup, s.logger);
    const tracer = s.tracerProvider?.getTracer(SCOPE);
    const meter = s.meterProvider?.getMeter(SCOPE);
    this.#spans = tracer && new LockSpans(tracer, attributes);
    this.#metrics = meter && new LockMetrics(meter, attributes);
    this.#events = s.logger || s.hooks ? new LockEvents(s.prefix, s.backend, s.logger, s.hooks) : undefined;
  }

  /** Starts watching an acquire of `key`. */
  start(kind: LockKind, key: string): AcquireTrace {
    const span = this.#spans?.startAcquire(kind, key);
    return { kind, key, started: now(), contended: false, joined: false, span };
  }

  /** A lease `acquireAll` took with the others in one round trip sent at `started`. */
  acquiredTogether(lease: Lease, started: number): void {
    this.acquired({ kind: 'lock', key: lease.key, started, contended: false, joined: false, span: undefined }, lease);
  }

  /**
   * An `acquireAll`/`tryAcquireAll` whose one-step attempt at `keys` (sent at `started`) ended the
   * call without the locks: busy (`error` undefined: a try that found one of them taken), or the
   * error it rejects with. The outcome is the call's, recorded for each of its keys (a busy try
   * counts every key busy and contended: the attempt does not say which was taken); a quorum
   * failure is reported once. No acquire span: there is one call, not one per key.
   */
  failedTogether(keys: readonly string[], started: number, error: unknown, signal: unknown): void {
    if (error instanceof InvalidOptionError || error instanceof ClosedError) return; // a misuse, as in track
    const outcome = error === undefined ? 'busy' : outcomeOf(error, signal);
    for (const key of keys) this.#failed({ kind: 'lock', key, started, contended: outcome === 'busy', joined: false, span: undefined }, outcome, error, false);
    if (error instanceof QuorumError && keys.length > 0) this.quorumFailed('lock', keys[0]!, error.outcome);
  }

  /** Watches the acquire `acquiring` to its end; resolves or rejects as it does. */
  track<L extends Lease | null>(t: AcquireTrace, acquiring: Promise<L>, signal: unknown): Promise<L> {
    return acquiring.then(
      (lease) => {
        if (t.joined) {
          // A reentrant call that joined its scope's lease: no acquire of its own, but its span says what it got.
          if (t.span && lease) endAcquired(t.span, false, lease.fence, true);
          else t.span?.end();
        } else if (lease) this.acquired(t, lease);
        else this.#failed(t, 'busy', undefined);
        return lease;
      },
      (error: unknown) => {
        // A misuse (bad options, a closed manager) is the caller's bug, not a lock's outcome: not
        // counted, but its span says why it got nothing.
        if (!(error instanceof InvalidOptionError || error instanceof ClosedError)) this.#failed(t, outcomeOf(error, signal), error);
        else if (t.span) endFailed(t.span, 'error', false, error);
        throw error;
      },
    );
  }

  /** An acquire watched by `t` got `lease`. (Hot: nothing is allocated for a channel nobody set.) */
  acquired(t: AcquireTrace, lease: Lease): void {
    if (t.kind !== 'lock') this.#kinds.set(lease, t.kind);
    const ms = now() - t.started;
    this.#metrics?.acquireEnded(t.kind, t.key, 'acquired', ms, t.contended);
    if (t.span) endAcquired(t.span, t.contended, lease.fence);
    this.#spans?.startHold(t.kind, lease);
    this.#events?.acquired(t.kind, t.key, lease.fence, ms, t.contended);
  }

  #failed(t: AcquireTrace, outcome: Exclude<AcquireOutcome, 'acquired'>, error: unknown, quorum = true): void {
    const ms = now() - t.started;
    this.#metrics?.acquireEnded(t.kind, t.key, outcome, ms, t.contended);
    if (t.span) endFailed(t.span, outcome, t.contended, error);
    this.#events?.acquireFailed(t.kind, t.key, outcome, ms, t.contended, error);
    if (quorum && error instanceof QuorumError) this.quorumFailed(t.kind, t.key, error.outcome);
  }

  /** A lease ended: released, or lost (its `lostError` says why). (Hot, as `acquired` is.) */
  leaseEnded(lease: Lease): void {
    const kind = this.#kind(lease);
    const held = lease.heldFor;
    // A lease left to expire whose TTL ran out ended as its holder asked: not a loss.
    const asked = lease.leftToExpire && lease.lostError?.reason === 'expired';
    const lost = asked ? undefined : lease.lostError;
    const end = asked ? 'expired' : 'released';
    this.#metrics?.leaseEnded(kind, lease.key, held, end, lost);
    this.#spans?.endHold(lease, end, lost);
    this.#events?.leaseEnded(kind, lease, held, end, lost);
  }

  /** A watchdog renewal of `lease` ended: `error` undefined when it succeeded. */
  renewal(lease: Lease, error: unknown): void {
    const kind = this.#kind(lease);
    this.#metrics?.renewal(kind, lease.key, error === undefined);
    this.#spans?.renewal(lease, error);
    this.#events?.renewal(kind, lease, error);
    if (error instanceof QuorumError) this.quorumFailed(kind, lease.key, error.outcome);
  }

  /** Redlock reached no quorum on an operation on `key`. */
  quorumFailed(kind: LockKind, key: string, outcome: QuorumOutcome): void {
    this.#metrics?.quorumFailed(kind, key, outcome.operation);
    this.#events?.quorumFailed(kind, key, outcome);
  }

  /** True when spans are recorded: the manager then watches releases with {@link Observer.traceRelease}. */
  get tracing(): boolean {
    return this.#spans !== undefined;
  }

  /** Runs the release of `lease` (`release`) as a `latchkey.release` span (see {@link LockSpans.traceRelease}). */
  traceRelease<R>(lease: Lease, release: () => Promise<R>): Promise<R> {
    return this.#spans!.traceRelease(this.#kind(lease), lease, release);
  }

  /** The start-up check of a server's eviction policy came back: a warning when it can evict lock keys. */
  evictionPolicy(report: EvictionPolicyReport, node: string | undefined): void {
    this.#events?.evictionPolicy(report, node);
  }

  #kind(lease: Lease): LockKind {
    return this.#kinds.get(lease) ?? 'lock';
  }
}

/** What an acquire's rejection means. */
function outcomeOf(error: unknown, signal: unknown): Exclude<AcquireOutcome, 'acquired' | 'busy'> {
  if (error instanceof LockTimeoutError) return 'timeout';
  if (error instanceof LockAbortedError) return 'aborted';
  if (signal instanceof AbortSignal && signal.aborted && error === signal.reason) return 'aborted';
  return 'error';
}
