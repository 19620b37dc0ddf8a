import { InvalidOptionError } from './errors.js';

/** The longest TTL latchkey accepts: the longest delay Node.js timers can wait (about 24.8 days). */
export const MAX_TTL = 2 ** 31 - 1;
/** The shortest TTL: below this the clock-drift allowance leaves no validity. */
export const MIN_TTL = 10;

/**
 * The longest lock name, in bytes of UTF-8: far above any real name, and it keeps every key built
 * from it (`<prefix>{<name>}:sem:permits` and the like) about a kilobyte. Each name leaves a fence
 * counter in Redis for 24 hours after its last acquire, so unbounded names would cost unbounded memory.
 */
export const MAX_NAME_BYTES = 1024;

export function checkKey(key: unknown, option = 'key'): string {
  if (typeof key !== 'string' || key.length === 0) {
    throw new InvalidOptionError(option, 'a non-empty string naming the lock, e.g. "orders:42"', key);
  }
  // A resource of fencedWrite is the caller's own key (no fence counter): only lock names are bounded.
  if (option !== 'resource' && key.length > MAX_NAME_BYTES / 3 && Buffer.byteLength(key, 'utf8') > MAX_NAME_BYTES) {
    throw new InvalidOptionError(option, `a lock name of at most ${MAX_NAME_BYTES} bytes of UTF-8`, key, `a string of ${Buffer.byteLength(key, 'utf8')} bytes`);
  }
  if (option !== 'resource' && key.startsWith('}')) {
    // Every lock's keys (a semaphore's, a read-write lock's and a fair lock's too) are
    // `<prefix>{<name>}…`: a name starting with "}" makes an empty hash tag, which would scatter
    // them over Redis Cluster slots. Refused on every backend, so that a name that works on one
    // Redis does not fail once the application moves to a Cluster.
    throw new InvalidOptionError(option, 'a lock name that does not start with "}"', key);
  }
  return key;
}

export function checkTtl(ttl: unknown, option = 'ttl'): number {
  if (typeof ttl !== 'number' || !Number.isInteger(ttl) || ttl < MIN_TTL || ttl > MAX_TTL) {
    throw new InvalidOptionError(
      option,
      `an integer number of milliseconds from ${MIN_TTL} to ${MAX_TTL} (about 24.8 days, the longest Node.js timer)`,
      ttl,
    );
  }
  return ttl;
}

/** A wait in milliseconds: a non-negative integer, or Infinity to wait until acquired or aborted. */
export function checkWait(wait: unknown, option = 'wait'): number {
  if (typeof wait !== 'number' || Number.isNaN(wait) || wait < 0 || (!Number.isInteger(wait) && wait !== Infinity)) {
    throw new InvalidOptionError(option, 'a non-negative integer number of milliseconds, or Infinity', wait);
  }
  return wait;
}

export function checkSignal(signal: unknown, option = 'signal'): AbortSignal | undefined {
  if (signal === undefined) return undefined;
  if (
    typeof signal !== 'object' ||
    signal === null ||
    typeof (signal as AbortSignal).aborted !== 'boolean' ||
    typeof (signal as AbortSignal).addEventListener !== 'function'
  ) {
    throw new InvalidOptionError(option, 'an AbortSignal (e.g. AbortSignal.timeout(5000))', signal);
  }
  return signal as AbortSignal;
}

export function checkFraction(value: unknown, option: string, max: number): number {
  if (typeof value !== 'number' || !(value >= 0 && value <= max)) {
    throw new InvalidOptionError(option, `a number from 0 to ${max}`, value);
  }
  return value;
}

export function checkPrefix(prefix: unknown): string {
  if (typeof prefix !== 'string' || /[{}]/.test(prefix)) {
    throw new InvalidOptionError('prefix', 'a string without "{" or "}" (latchkey adds the hash tag itself), e.g. "myapp:locks:"', prefix);
  }
  return prefix;
}


export function checkFence(fence: unknown, option = 'fence'): number {
  if (typeof fence !== 'number' || !Number.isSafeInteger(fence) || fence < 1) {
    throw new InvalidOptionError(option, 'a positive safe integer (a lease\'s fence)', fence);
  }
  return fence;
}

/** Rejects options objects that are not plain objects, and names unknown options (typos). */
/** Refuses options that are not an object (`null`, a number, an array): spread, they would pass unseen. */
export function checkOptionsObject(options: unknown, what: string): asserts options is object {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new InvalidOptionError(what, 'an options object', options);
  }
}

export function checkOptions<T extends object>(options: unknown, known: readonly string[], what: string): Partial<T> {
  if (options === undefined) return {};
  checkOptionsObject(options, what);
  for (const name of Object.keys(options)) {
    if (!known.includes(name)) {
      throw new InvalidOptionError(`${what}.${name}`, `one of the known options (${known.join(', ')})`, name);
    }
  }
  return options as Partial<T>;
}
