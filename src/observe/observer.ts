import {
  context,
  createNoopMeter,
  metrics,
  ProxyTracerProvider,
  SpanStatusCode,
  trace,
  type Attributes,
  type Counter,
  type Histogram,
  type MeterProvider,
  type Span,
  type Tracer,
  type TracerProvider,
} from '@opentelemetry/api';
import type { QuorumOutcome } from '../backend/quorum.js';
import { now } from '../clock.js';
import { ClosedError, InvalidOptionError, LeaseLostError, LockAbortedError, LockError, LockTimeoutError, QuorumError } from '../errors.js';
import type { Lease } from '../lease/lease.js';
import type { EvictionPolicyReport } from '../backend/eviction-policy.js';
import type { AcquiredEvent, AcquireOutcome, EvictionPolicyEvent, LockEventBase, LockHooks, LockKind, Logger, LostEvent, ObservabilityOptions, ReleasedEvent } from './types.js';

/** The instrumentation scope of latchkey's meters and tracers. */
const SCOPE = 'latchkey';

/** Bucket boundaries of the duration histograms, in seconds: 0.5 ms to a minute. */
const BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

const HOOK_NAMES = ['acquired', 'acquireFailed', 'released', 'lost', 'renewed', 'renewFailed', 'quorumFailed', 'evictionPolicy'] as const;
const LOGGER_METHODS = ['debug', 'info', 'warn', 'error'] as const;

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

interface Instruments {
  readonly acquireDuration: Histogram;
  readonly contended: Counter;
  readonly holdDuration: Histogram;
  readonly lost: Counter;
  readonly renewal: Counter;
  readonly quorumFailure: Counter;
}

/**
 * Builds the observer of a manager from its options, or returns undefined when nothing listens
 * (no logger, no hooks, no providers given, no SDK registered globally): the manager then skips
 * every instrumentation point.
 */
export function createObserver(o: ObservabilityOptions, prefix: string, backend: string): Observer | undefined {
  const logger = checkLogger(o.logger);
  const hooks = checkHooks(o.hooks);
  const keyGroup = o.keyGroup;
  if (keyGroup !== undefined && typeof keyGroup !== 'function') {
    throw new InvalidOptionError('keyGroup', 'a function from a lock name to a low-cardinality group', keyGroup);
  }
  const meterProvider = checkProvider<MeterProvider>(o.meterProvider, 'meterProvider', 'getMeter') ?? liveGlobalMeterProvider();
  const tracerProvider = checkProvider<TracerProvider>(o.tracerProvider, 'tracerProvider', 'getTracer') ?? liveGlobalTracerProvider();
  if (!logger && !hooks && !meterProvider && !tracerProvider) return undefined;
  return new Observer({ prefix, backend, logger, hooks, meterProvider, tracerProvider, keyGroup });
}

function checkLogger(value: unknown): Logger | undefined {
  if (value === undefined) return undefined;
  const ok = typeof value === 'object' && value !== null && LOGGER_METHODS.every((m) => typeof (value as Record<string, unknown>)[m] === 'function');
  if (!ok) throw new InvalidOptionError('logger', 'a pino-compatible logger with debug, info, warn and error methods', value);
  return value as Logger;
}

function checkHooks(value: unknown): LockHooks | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'object' || value === null) throw new InvalidOptionError('hooks', `an object of functions (${HOOK_NAMES.join(', ')})`, value);
  for (const [name, fn] of Object.entries(value)) {
    if (!(HOOK_NAMES as readonly string[]).includes(name)) throw new InvalidOptionError(`hooks.${name}`, `one of ${HOOK_NAMES.join(', ')}`, name);
    if (fn !== undefined && typeof fn !== 'function') throw new InvalidOptionError(`hooks.${name}`, 'a function', fn);
  }
  return value as LockHooks;
}

function checkProvider<P>(value: unknown, option: string, method: string): P | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'object' || value === null || typeof (value as Record<string, unknown>)[method] !== 'function') {
    throw new InvalidOptionError(option, `an OpenTelemetry ${option === 'meterProvider' ? 'MeterProvider' : 'TracerProvider'}`, value);
  }
  return value as P;
}

/** The global meter provider, unless it is the API's no-op one (no SDK registered). */
function liveGlobalMeterProvider(): MeterProvider | undefined {
  const provider = metrics.getMeterProvider();
  return provider.getMeter(SCOPE) === createNoopMeter() ? undefined : provider;
}

/** The global tracer provider, unless its delegate is the API's no-op one (no SDK registered). */
function liveGlobalTracerProvider(): TracerProvider | undefined {
  const provider = trace.getTracerProvider() as TracerProvider & { getDelegate?: () => TracerProvider };
  if (typeof provider.getDelegate !== 'function') return provider; // an SDK's provider itself
  // A proxy without a delegate answers with the API's no-op provider, a singleton.
  return provider.getDelegate() === new ProxyTracerProvider().getDelegate() ? undefined : provider;
}

interface ObserverSettings {
  readonly prefix: string;
  readonly backend: string;
  readonly logger: Logger | undefined;
  readonly hooks: LockHooks | undefined;
  readonly meterProvider: MeterProvider | undefined;
  readonly tracerProvider: TracerProvider | undefined;
  readonly keyGroup: ((key: string) => string) | undefined;
}

/** Records a manager's lock events as metrics, spans, hook calls and log records. */
export class Observer {
  readonly #prefix: string;
  readonly #backend: string;
  readonly #logger: Logger | undefined;
  readonly #hooks: LockHooks | undefined;
  readonly #keyGroup: ((key: string) => string) | undefined;
  readonly #instruments: Instruments | undefined;
  readonly #tracer: Tracer | undefined;
  /** Kinds of the leases that are not plain locks (permits of a semaphore, read-write or fair lock). */
  readonly #kinds = new WeakMap<Lease, LockKind>();
  readonly #attributeCache = new Map<string, Attributes>();
  /** The `latchkey.hold` span of each lease held, from its grant to its release or loss (only with a tracer). */
  readonly #holds = new WeakMap<Lease, Span>();

  constructor(s: ObserverSettings) {
    this.#prefix = s.prefix;
    this.#backend = s.backend;
    this.#logger = s.logger;
    this.#hooks = s.hooks;
    this.#keyGroup = s.keyGroup;
    this.#tracer = s.tracerProvider?.getTracer(SCOPE);
    const meter = s.meterProvider?.getMeter(SCOPE);
    if (meter) {
      const advice = { explicitBucketBoundaries: BUCKETS };
      this.#instruments = {
        acquireDuration: meter.createHistogram('latchkey.acquire.duration', {
          description: 'How long acquires took, their wait included, by outcome.',
          unit: 's',
          advice,
        }),
        contended: meter.createCounter('latchkey.acquire.contended', {
          description: 'Acquires that found the lock held at their first look.',
          unit: '{acquire}',
        }),
        holdDuration: meter.createHistogram('latchkey.lease.hold.duration', {
          description: 'How long leases were held, until released or lost.',
          unit: 's',
          advice,
        }),
        lost: meter.createCounter('latchkey.lease.lost', { description: 'Leases lost, by reason.', unit: '{lease}' }),
        renewal: meter.createCounter('latchkey.lease.renewal', { description: 'Watchdog renewals, by outcome.', unit: '{renewal}' }),
        quorumFailure: meter.createCounter('latchkey.quorum.failure', {
          description: 'Redlock operations that reached no majority of the nodes.',
          unit: '{operation}',
        }),
      };
    }
  }

  /** Starts watching an acquire of `key`. */
  start(kind: LockKind, key: string): AcquireTrace {
    const span = this.#tracer?.startSpan('latchkey.acquire', { attributes: { ...this.#attributes(kind, key) } });
    return { kind, key, started: now(), contended: false, joined: false, span };
  }

  /** A lease `acquireAll` took with the others in one round trip sent at `started`. */
  acquiredTogether(lease: Lease, started: number): void {
    this.acquired({ kind: 'lock', key: lease.key, started, contended: false, joined: false, span: undefined }, lease);
  }

  /** Watches the acquire `acquiring` to its end; resolves or rejects as it does. */
  track<L extends Lease | null>(t: AcquireTrace, acquiring: Promise<L>, signal: unknown): Promise<L> {
    return acquiring.then(
      (lease) => {
        if (t.joined) t.span?.end();
        else if (lease) this.acquired(t, lease);
        else this.#failed(t, 'busy', undefined);
        return lease;
      },
      (error: unknown) => {
        // A misuse (bad options, a closed manager) is the caller's bug, not a lock's outcome.
        if (!(error instanceof InvalidOptionError || error instanceof ClosedError)) this.#failed(t, outcomeOf(error, signal), error);
        else t.span?.end();
        throw error;
      },
    );
  }

  /** An acquire watched by `t` got `lease`. (Hot: nothing is allocated for a channel nobody set.) */
  acquired(t: AcquireTrace, lease: Lease): void {
    if (t.kind !== 'lock') this.#kinds.set(lease, t.kind);
    const ms = now() - t.started;
    const instruments = this.#instruments;
    if (instruments) {
      instruments.acquireDuration.record(ms / 1000, this.#attributes(t.kind, t.key, 'latchkey.outcome', 'acquired', t.contended));
      if (t.contended) instruments.contended.add(1, this.#attributes(t.kind, t.key));
    }
    if (t.span) {
      t.span.setAttributes({ 'latchkey.outcome': 'acquired', 'latchkey.contended': t.contended, 'latchkey.fence': lease.fence });
      t.span.end();
    }
    if (this.#tracer) this.#startHold(t.kind, lease);
    const logger = this.#logger;
    const hook = this.#hooks?.acquired;
    if (!logger && !hook) return;
    const event: AcquiredEvent = {
      key: t.key,
      kind: t.kind,
      prefix: this.#prefix,
      backend: this.#backend,
      fence: lease.fence,
      duration: ms,
      contended: t.contended,
    };
    logger?.debug({ latchkey: 'acquired', ...event }, `latchkey: acquired "${t.key}"`);
    if (hook) this.#call('acquired', hook, event);
  }

  #failed(t: AcquireTrace, outcome: Exclude<AcquireOutcome, 'acquired'>, error: unknown): void {
    const ms = now() - t.started;
    const base = this.#base(t.kind, t.key);
    if (this.#instruments) {
      this.#instruments.acquireDuration.record(ms / 1000, this.#attributes(t.kind, t.key, 'latchkey.outcome', outcome, t.contended));
      if (t.contended) this.#instruments.contended.add(1, this.#attributes(t.kind, t.key));
    }
    if (t.span) {
      t.span.setAttributes({ 'latchkey.outcome': outcome, 'latchkey.contended': t.contended });
      if (error !== undefined) t.span.setAttribute('error.type', errorType(error));
      // Not the error's message: it names the lock.
      if (outcome === 'error' || outcome === 'timeout') t.span.setStatus({ code: SpanStatusCode.ERROR, message: error === undefined ? outcome : errorType(error) });
      t.span.end();
    }
    const record = { latchkey: 'acquireFailed', ...base, outcome, duration: ms, contended: t.contended, ...(error === undefined ? {} : { err: errorSummary(error) }) };
    const message = `latchkey: acquire of "${t.key}" ended: ${outcome}`;
    if (outcome === 'error') this.#logger?.error(record, message);
    else if (outcome === 'busy') this.#logger?.debug(record, message);
    else this.#logger?.info(record, message);
    if (this.#hooks?.acquireFailed) {
      const event = { ...base, outcome, duration: ms, contended: t.contended, ...(error === undefined ? {} : { error }) };
      this.#call('acquireFailed', this.#hooks.acquireFailed, event);
    }
    if (error instanceof QuorumError) this.quorumFailed(t.kind, t.key, error.outcome);
  }

  /** A lease ended: released, or lost (its `lostError` says why). (Hot, as `acquired` is.) */
  leaseEnded(lease: Lease): void {
    const kind = this.#kinds.get(lease) ?? 'lock';
    const held = lease.heldFor;
    const lost = lease.lostError;
    const instruments = this.#instruments;
    if (instruments) {
      instruments.holdDuration.record(held / 1000, this.#attributes(kind, lease.key, 'latchkey.lease.end', lost ? 'lost' : 'released'));
      if (lost) instruments.lost.add(1, this.#attributes(kind, lease.key, 'latchkey.lost.reason', lost.reason));
    }
    if (this.#tracer) this.#endHold(lease, lost);
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
    const event: ReleasedEvent = { key: lease.key, kind, prefix: this.#prefix, backend: this.#backend, fence: lease.fence, held };
    logger?.debug({ latchkey: 'released', ...event }, `latchkey: released "${lease.key}"`);
    if (hook) this.#call('released', hook, event);
  }

  /** A watchdog renewal of `lease` ended: `error` undefined when it succeeded. */
  renewal(lease: Lease, error: unknown): void {
    const kind = this.#kinds.get(lease) ?? 'lock';
    const base = this.#base(kind, lease.key);
    this.#instruments?.renewal.add(1, this.#attributes(kind, lease.key, 'latchkey.outcome', error === undefined ? 'ok' : 'failed'));
    this.#holds.get(lease)?.addEvent(
      error === undefined ? 'latchkey.renewed' : 'latchkey.renew_failed',
      error === undefined ? undefined : { 'error.type': errorType(error) },
    );
    if (error === undefined) {
      const event = { ...base, fence: lease.fence };
      this.#logger?.debug({ latchkey: 'renewed', ...event }, `latchkey: renewed "${lease.key}"`);
      if (this.#hooks?.renewed) this.#call('renewed', this.#hooks.renewed, event);
      return;
    }
    this.#logger?.warn(
      { latchkey: 'renewFailed', ...base, fence: lease.fence, err: errorSummary(error) },
      `latchkey: renewal of "${lease.key}" failed`,
    );
    if (this.#hooks?.renewFailed) {
      const event = { ...base, fence: lease.fence, error };
      this.#call('renewFailed', this.#hooks.renewFailed, event);
    }
    if (error instanceof QuorumError) this.quorumFailed(kind, lease.key, error.outcome);
  }

  /** Redlock reached no quorum on an operation on `key`. */
  quorumFailed(kind: LockKind, key: string, outcome: QuorumOutcome): void {
    this.#instruments?.quorumFailure.add(1, this.#attributes(kind, key, 'latchkey.operation', outcome.operation));
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

  /** True when spans are recorded: the manager then watches releases with {@link Observer.traceRelease}. */
  get tracing(): boolean {
    return this.#tracer !== undefined;
  }

  /**
   * Runs the release of `lease` (`release`) as a `latchkey.release` span, a child of the lease's
   * `latchkey.hold` span: the round trip, its outcome (`released`, or `lost` with the reason the
   * lease was lost for before the release, or else the one the reply gave), and status error when
   * it failed.
   */
  async traceRelease<R>(lease: Lease, release: () => Promise<R>): Promise<R> {
    const tracer = this.#tracer!;
    const kind = this.#kinds.get(lease) ?? 'lock';
    const hold = this.#holds.get(lease);
    const parent = hold ? trace.setSpan(context.active(), hold) : context.active();
    const span = tracer.startSpan('latchkey.release', { attributes: { ...this.#attributes(kind, lease.key) } }, parent);
    try {
      const reply = await release();
      // A lease lost first (its validity ran out) is reported lost by its release, whatever the reply.
      const lost = lease.lostError?.reason ?? (typeof reply === 'string' && reply !== 'ok' ? reply : undefined);
      span.setAttribute('latchkey.outcome', lost ? 'lost' : 'released');
      if (lost) span.setAttribute('latchkey.lost.reason', lost);
      return reply;
    } catch (error) {
      span.setAttributes({ 'latchkey.outcome': 'error', 'error.type': errorType(error) });
      span.setStatus({ code: SpanStatusCode.ERROR, message: errorType(error) });
      throw error;
    } finally {
      span.end();
    }
  }

  #startHold(kind: LockKind, lease: Lease): void {
    const span = this.#tracer!.startSpan('latchkey.hold', { attributes: { ...this.#attributes(kind, lease.key) } });
    span.setAttribute('latchkey.fence', lease.fence);
    this.#holds.set(lease, span);
  }

  #endHold(lease: Lease, lost: LeaseLostError | undefined): void {
    const span = this.#holds.get(lease);
    if (!span) return;
    this.#holds.delete(lease);
    span.setAttribute('latchkey.lease.end', lost ? 'lost' : 'released');
    if (lost) {
      span.setAttributes({ 'latchkey.lost.reason': lost.reason, 'error.type': lost.code });
      span.setStatus({ code: SpanStatusCode.ERROR, message: `lease lost: ${lost.reason}` });
    }
    span.end();
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

  /**
   * Metric attributes, and (copied) the spans' first ones: never the lock name itself (unbounded
   * cardinality, and names can carry ids such as `orders:42` or an e-mail address) nor a token, at
   * most its `keyGroup` group; one more attribute `name` = `value`, and `latchkey.contended` for an
   * acquire. Made once per combination and reused.
   */
  #attributes(kind: LockKind, key: string, name?: string, value?: string, contended?: boolean): Attributes {
    const group = this.#group(key);
    const id = `${kind}\0${name ?? ''}\0${value ?? ''}\0${contended ?? ''}\0${group ?? ''}`;
    let attributes = this.#attributeCache.get(id);
    if (!attributes) {
      const made: Attributes = { 'latchkey.kind': kind, 'latchkey.prefix': this.#prefix, 'latchkey.backend': this.#backend };
      if (name !== undefined) made[name] = value;
      if (contended !== undefined) made['latchkey.contended'] = contended;
      if (group !== undefined) made['latchkey.key.group'] = group;
      // Bounded: kinds x outcomes x reasons x the groups keyGroup makes (low cardinality by contract).
      if (this.#attributeCache.size < 10_000) this.#attributeCache.set(id, made);
      attributes = made;
    }
    return attributes;
  }

  #group(key: string): string | undefined {
    if (!this.#keyGroup) return undefined;
    try {
      return String(this.#keyGroup(key));
    } catch (error) {
      this.#logger?.warn({ latchkey: 'keyGroupFailed', err: errorSummary(error) }, 'latchkey: the keyGroup function threw');
      return undefined;
    }
  }

  #call<E>(hook: string, fn: (event: E) => void, event: E): void {
    try {
      fn(event);
    } catch (error) {
      this.#logger?.warn({ latchkey: 'hookFailed', hook, err: errorSummary(error) }, `latchkey: hook "${hook}" threw`);
    }
  }
}

/** An error's type for the `error.type` attribute of OpenTelemetry's conventions: latchkey's code, or the class name. */
function errorType(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  if (error instanceof LockError || (typeof code === 'string' && code !== '')) return String(code);
  return error instanceof Error ? error.name : typeof error;
}

/** What an acquire's rejection means. */
function outcomeOf(error: unknown, signal: unknown): Exclude<AcquireOutcome, 'acquired' | 'busy'> {
  if (error instanceof LockTimeoutError) return 'timeout';
  if (error instanceof LockAbortedError) return 'aborted';
  if (signal instanceof AbortSignal && signal.aborted && error === signal.reason) return 'aborted';
  return 'error';
}

/**
 * An error as a log record carries it: name, code, message. Not the error itself: a client's error
 * may hold the command it failed on, whose arguments include a lease's token.
 */
function errorSummary(error: unknown): { name: string; code?: string; message: string; reason?: string } | undefined {
  if (error === undefined) return undefined;
  if (!(error instanceof Error)) return { name: typeof error, message: String(error) };
  const code = (error as { code?: unknown }).code;
  return {
    name: error.name,
    ...(typeof code === 'string' ? { code } : {}),
    message: error.message,
    ...(error instanceof LeaseLostError ? { reason: error.reason } : {}),
  };
}
