import { processDescription } from '../holder-names.js';
import { driftFor } from '../clock.js';
import { InvalidOptionError } from '../errors.js';
import { DEFAULT_PREFIX } from '../keys.js';
import type { RenewOptions } from '../lease/watchdog.js';
import type { AcquireOptions, LocksOptions } from '../options.js';
import { checkStrategy, DEFAULT_TUNING, type WaitStrategyName, type WaitTuning } from '../wait/strategy.js';
import { checkFraction, checkOptions, checkPrefix, checkSignal, checkTtl, checkWait, MIN_TTL } from '../validate.js';

/** A manager's settings: its options, checked, with the defaults filled in. */
export interface Settings {
  readonly prefix: string;
  readonly ttl: number;
  readonly wait: number;
  readonly strategy: WaitStrategyName;
  readonly driftFactor: number;
  readonly tuning: WaitTuning;
  readonly localHandoffs: number;
  /** How this manager describes itself as the holder of its leases, if at all (see HolderNames). */
  readonly holder: string | undefined;
  /** Whether calls are reentrant by default (see {@link LocksOptions.reentrant}). */
  readonly reentrant: boolean;
}

/** The default `recheck` in compat mode, ms (see {@link LocksOptions.recheck}). */
const COMPAT_RECHECK = 100;

/** A manager's settings from its options (already checked for unknown names). */
export function readSettings(o: Partial<LocksOptions>): Settings {
  return {
    // In compat mode the lock key is `prefix + name` as the legacy services spell it: no prefix by default.
    prefix: o.prefix === undefined ? (o.compat === undefined ? DEFAULT_PREFIX : '') : checkPrefix(o.prefix),
    ttl: o.ttl === undefined ? 10_000 : checkTtl(o.ttl),
    wait: o.wait === undefined ? 10_000 : checkWait(o.wait),
    strategy: o.strategy === undefined ? 'notify' : checkStrategy(o.strategy),
    driftFactor: o.driftFactor === undefined ? 0.01 : checkFraction(o.driftFactor, 'driftFactor', 0.5),
    tuning: {
      ...DEFAULT_TUNING,
      // Legacy clients release with a bare DEL that wakes nobody: compat waiters look more often.
      ...(o.compat === undefined ? {} : { recheck: COMPAT_RECHECK }),
      ...(o.recheck === undefined ? {} : { recheck: checkCount(o.recheck, 'recheck', 1) }),
    },
    localHandoffs: o.localHandoffs === undefined ? 8 : checkCount(o.localHandoffs, 'localHandoffs', 0),
    holder: checkHolder(o.holder),
    reentrant: o.reentrant === undefined ? false : checkBoolean(o.reentrant, 'reentrant'),
  };
}

/** What one call asks for: its options, checked, with the manager's defaults for what it leaves out. */
export interface CallSettings {
  readonly ttl: number;
  /** 0 for a call that tries once. */
  readonly wait: number;
  readonly signal: AbortSignal | undefined;
  readonly strategy: WaitStrategyName;
  readonly renew: RenewOptions | undefined;
}

/** A call's settings (`once`: it does not wait). */
export function callSettings(settings: Settings, o: Partial<AcquireOptions>, once: boolean): CallSettings {
  const ttl = o.ttl === undefined ? settings.ttl : checkTtl(o.ttl);
  return {
    ttl,
    wait: once ? 0 : o.wait === undefined ? settings.wait : checkWait(o.wait),
    signal: checkSignal(o.signal),
    strategy: o.strategy === undefined ? settings.strategy : checkStrategy(o.strategy),
    renew: checkRenew(o.renew, ttl, settings.driftFactor),
  };
}

/** Whether a call with `options` is reentrant (validated), given the manager's default. */
export function isReentrant(settings: Pick<Settings, 'reentrant'>, options: unknown): boolean {
  const asked = (options as { reentrant?: unknown } | undefined)?.reentrant;
  return asked === undefined ? settings.reentrant : checkBoolean(asked, 'reentrant');
}

export function checkBoolean(value: unknown, option: string): boolean {
  if (typeof value !== 'boolean') throw new InvalidOptionError(option, 'true or false', value);
  return value;
}

export function checkCount(value: unknown, option: string, min: number, expected?: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min) {
    throw new InvalidOptionError(option, expected ?? (min === 0 ? 'a non-negative integer' : 'a positive integer number of milliseconds'), value);
  }
  return value;
}

/**
 * Checks renew options; with the lease's `ttl` (and the manager's driftFactor), also that `every`
 * can renew the lease before its validity runs out: below `ttl` minus the clock-drift allowance.
 */
export function checkRenew(value: unknown, ttl?: number, driftFactor = 0): RenewOptions | undefined {
  if (value === undefined || value === false) return undefined;
  if (value === true) return {};
  const o = checkOptions<RenewOptions>(value, ['every', 'maxHold'], 'renew');
  const renew: { every?: number; maxHold?: number } = {};
  if (o.every !== undefined) renew.every = checkEvery(o.every, ttl, driftFactor);
  if (o.maxHold !== undefined) renew.maxHold = checkTtl(o.maxHold, 'renew.maxHold');
  return renew;
}

/** `renew.every`: a TTL-like number of ms, and shorter than the lease's validity (the watchdog never renews a lease past it). */
function checkEvery(every: unknown, ttl: number | undefined, driftFactor: number): number {
  const checked = checkTtl(every, 'renew.every');
  if (ttl === undefined) return checked;
  const drift = driftFor(ttl, driftFactor);
  const validity = ttl - drift;
  if (checked < validity) return checked;
  const range = validity - 1 >= MIN_TTL ? `from ${MIN_TTL} to ${validity - 1}` : `of at least ${MIN_TTL} (none fits: raise ttl)`;
  throw new InvalidOptionError(
    'renew.every',
    `an integer number of milliseconds ${range}, shorter than the lease's validity (ttl ${ttl} ms minus the ${drift} ms clock-drift allowance) ` +
      'so that it renews the lease before it expires; leave it out to renew every third of the ttl',
    every,
  );
}

function checkHolder(value: unknown): string | undefined {
  if (value === false) return undefined;
  if (value === undefined || value === true) return processDescription();
  if (typeof value !== 'string' || value === '' || value.length > 200) {
    throw new InvalidOptionError('holder', 'true, false, or a description of at most 200 characters', value);
  }
  return value;
}
