import { createNoopMeter, metrics, ProxyTracerProvider, trace, type MeterProvider, type TracerProvider } from '@opentelemetry/api';
import { InvalidOptionError } from '../errors.js';
import type { LockHooks, Logger, ObservabilityOptions } from './types.js';

/** The instrumentation scope of latchkey's meters and tracers. */
export const SCOPE = 'latchkey';

const HOOK_NAMES = ['acquired', 'acquireFailed', 'released', 'lost', 'renewed', 'renewFailed', 'quorumFailed', 'evictionPolicy'] as const;
const LOGGER_METHODS = ['debug', 'info', 'warn', 'error'] as const;

/** A manager's observability options, checked, with the providers it records to. */
export interface ObserverSettings {
  readonly prefix: string;
  readonly backend: string;
  readonly logger: Logger | undefined;
  readonly hooks: LockHooks | undefined;
  readonly meterProvider: MeterProvider | undefined;
  readonly tracerProvider: TracerProvider | undefined;
  readonly keyGroup: ((key: string) => string) | undefined;
}

/**
 * Checks a manager's observability options (an InvalidOptionError says what was expected) and
 * finds its providers: those given, else the global ones an SDK registered. Undefined when nothing
 * listens (no logger, no hooks, no providers given, no SDK registered globally).
 */
export function observerSettings(o: ObservabilityOptions, prefix: string, backend: string): ObserverSettings | undefined {
  const logger = checkLogger(o.logger);
  const hooks = checkHooks(o.hooks);
  const keyGroup = o.keyGroup;
  if (keyGroup !== undefined && typeof keyGroup !== 'function') {
    throw new InvalidOptionError('keyGroup', 'a function from a lock name to a low-cardinality group', keyGroup);
  }
  const meterProvider = checkProvider<MeterProvider>(o.meterProvider, 'meterProvider', 'getMeter') ?? liveGlobalMeterProvider();
  const tracerProvider = checkProvider<TracerProvider>(o.tracerProvider, 'tracerProvider', 'getTracer') ?? liveGlobalTracerProvider();
  if (!logger && !hooks && !meterProvider && !tracerProvider) return undefined;
  return { prefix, backend, logger, hooks, meterProvider, tracerProvider, keyGroup };
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
