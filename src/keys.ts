/**
 * The Redis keys of one lock. All share the hash tag `{name}`, so they land in one Redis Cluster
 * slot and one Lua script may touch them all.
 */
export interface LockKeys {
  /** The lock's name as the user gave it. */
  readonly name: string;
  /** Holds the holder's token while a lease lives. */
  readonly lock: string;
  /** The last fence issued for this lock. */
  readonly fence: string;
  /** Sorted set of the waiters queued for this lock, in arrival order. */
  readonly queue: string;
  /** Hash from queued waiter to the deadline after which its entry is dead. */
  readonly alive: string;
  /** A semaphore's permits hash (see `semaphore`); unused by a lock (older versions kept a holder record here). */
  readonly holder: string;
  /** Compat mode only (the `compat` option): the token of the latchkey lease that wrote the legacy lock key. */
  readonly owner: string;
  /**
   * Set for a counting semaphore's keys ({@link semaphoreKeys}): `lock` is then the holders set
   * and `holder` the permits hash, and backends run the semaphore's operations.
   */
  readonly semaphore?: SemaphoreSpec;
}

/** What one semaphore acquire asks for. */
export interface SemaphoreSpec {
  /** How many permits the semaphore has. */
  readonly limit: number;
  /** How many this acquire takes. */
  readonly permits: number;
}

export const DEFAULT_PREFIX = 'latchkey:';

export function lockKeys(prefix: string, name: string): LockKeys {
  return new LockKeyNames(name, `${prefix}{${name}}`);
}

/**
 * A lock's keys: those of every lease (lock, fence, queue) made at once, the others (a queued
 * waiter's, a semaphore's, compat mode's) on first use: a process holding many leases keeps
 * three strings fewer for each.
 */
class LockKeyNames implements LockKeys {
  readonly name: string;
  readonly lock: string;
  readonly fence: string;
  readonly queue: string;
  #alive: string | undefined = undefined;
  #holder: string | undefined = undefined;
  #owner: string | undefined = undefined;

  constructor(name: string, base: string) {
    this.name = name;
    this.lock = base;
    this.fence = `${base}:fence`;
    this.queue = `${base}:queue`;
  }

  get alive(): string {
    return (this.#alive ??= `${this.lock}:alive`);
  }

  get holder(): string {
    return (this.#holder ??= `${this.lock}:holder`);
  }

  get owner(): string {
    return (this.#owner ??= `${this.lock}:owner`);
  }
}

/** How many locks' keys a {@link KeysCache} keeps. */
/**
 * Where a manager registers who it is (see `registerHolder`): `<prefix>holder:<tag>`. No lock's
 * key looks like it: those have their name in braces.
 */
export function holderRegistryKey(prefix: string, tag: string): string {
  return `${prefix}holder:${tag}`;
}

export const KEYS_CACHE_SIZE = 1024;

/**
 * The keys of the locks a manager used last, so that a lock taken again and again builds its six
 * key strings once (and Redis's writes get flat strings, not concatenations to flatten each time).
 * Bounded: past {@link KEYS_CACHE_SIZE} names the oldest is dropped.
 */
export class KeysCache {
  readonly #prefix: string;
  readonly #keys = new Map<string, LockKeys>();

  constructor(prefix: string) {
    this.#prefix = prefix;
  }

  get(name: string): LockKeys {
    let keys = this.#keys.get(name);
    if (keys) return keys;
    keys = lockKeys(this.#prefix, name);
    if (this.#keys.size >= KEYS_CACHE_SIZE) this.#keys.delete(this.#keys.keys().next().value!);
    this.#keys.set(name, keys);
    return keys;
  }
}

/**
 * The keys of the counting semaphore `name`: `<prefix>{name}:sem` (holders, a sorted set of
 * tokens by expiry) and its companions, all with the hash tag `{name}`. A read-write lock uses
 * the same layout under `:rw`, a fair lock under `:fair`.
 */
/** Which primitive a semaphore-shaped set of keys belongs to: its key suffix. */
export type SemaphoreKind = 'sem' | 'rw' | 'fair';

export function semaphoreKeys(prefix: string, name: string, spec: SemaphoreSpec, kind: SemaphoreKind = 'sem'): LockKeys {
  const base = `${prefix}{${name}}:${kind}`;
  return {
    name,
    lock: base,
    fence: `${base}:fence`,
    queue: `${base}:queue`,
    alive: `${base}:alive`,
    holder: `${base}:permits`,
    owner: `${base}:owner`, // unused: semaphores have no compat mode
    semaphore: spec,
  };
}

/** The channel prefix of waiters' inboxes: a manager listens on `<prefix>inbox:<managerId>`. */
export function inboxPrefix(prefix: string): string {
  return `${prefix}inbox:`;
}

/** Escapes Redis glob characters, so that a key prefix matches itself only. */
export function escapeGlob(text: string): string {
  return text.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}

/** Lock names from lock keys `<prefix>{<name>}`, sorted, without duplicates. */
export function namesOf(keys: readonly string[], keyPrefix: string): string[] {
  const names = new Set<string>();
  for (const key of keys) {
    if (key.startsWith(`${keyPrefix}{`) && key.endsWith('}')) names.add(key.slice(keyPrefix.length + 1, -1));
  }
  return [...names].sort();
}
