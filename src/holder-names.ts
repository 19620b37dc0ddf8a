/**
 * Who holds a lock, with nothing written per lease: a manager registers who it is (host, pid, and
 * an application name when given: the `holder` option) under its tag, the first hex digits of
 * each of its tokens, and the holder of any lock is read from the lock's token. The uncontended
 * path sends nothing more for it: the registration is one write on the manager's first lease and
 * again at most once an hour while it takes or renews leases, pipelined with them.
 */
import { hostname } from 'node:os';
import type { Backend, HolderInfo, LockSnapshot } from './backend/backend.js';
import { now } from './clock.js';
import { holderRegistryKey } from './keys.js';
import { holderTag } from './token.js';

/** How long a registration lives, ms: a day. A manager registers again well before (see {@link REGISTER_EVERY}). */
export const REGISTRATION_TTL = 24 * 60 * 60 * 1000;
/** How often a manager that takes or renews leases registers again, at most, ms: an hour. */
export const REGISTER_EVERY = 60 * 60 * 1000;
/** Descriptions of other managers kept in memory, at most (each is looked up once). */
const KNOWN_MAX = 256;

/** The default description of this process: `<hostname> pid <pid>`. */
export function processDescription(): string {
  return `${hostname()} pid ${process.pid}`;
}

/** A manager's registration, and the descriptions of the managers whose leases it met. */
export class HolderNames {
  readonly #backend: Backend;
  readonly #prefix: string;
  readonly #tag: string;
  readonly #who: string | undefined;
  #registeredAt = -Infinity;
  /** Until when a lease of this manager left to expire lives (monotonic ms): its holder stays named until then. */
  #keepUntil = -Infinity;
  readonly #known = new Map<string, string>();
  readonly #lookups = new Map<string, Promise<string | null>>();

  /** `who`: this manager's description, or undefined when it registers nothing (`holder: false`). */
  constructor(backend: Backend, prefix: string, tag: string, who: string | undefined) {
    this.#backend = backend;
    this.#prefix = prefix;
    this.#tag = tag;
    this.#who = who;
  }

  /**
   * Registers this manager, when it is due: on its first lease, then at most every
   * {@link REGISTER_EVERY}. Not waited for. `at`: the time now, or one the caller read a moment ago
   * (a lease's acquire).
   */
  touch(at?: number): void {
    if (this.#who === undefined) return;
    const t = at ?? now();
    if (t - this.#registeredAt < REGISTER_EVERY) return;
    this.#registeredAt = t;
    this.#backend.registerHolder(holderRegistryKey(this.#prefix, this.#tag), this.#who, REGISTRATION_TTL).catch(() => {
      this.#registeredAt = -Infinity; // informational: tried again with the next lease
    });
  }

  /** A lease of this manager was left to expire (`Lease.letExpire`), valid until `validUntil`: its registration is kept past `close()`. */
  keepFor(validUntil: number): void {
    this.#keepUntil = Math.max(this.#keepUntil, validUntil);
  }

  /**
   * At `close()`, once its leases were released: takes the registration out, so that a closed
   * manager leaves no key behind, unless a lease it left to expire may still hold a lock (then the
   * entry expires by itself, a day after it was written).
   */
  async unregister(): Promise<void> {
    if (this.#who === undefined || this.#registeredAt === -Infinity || now() < this.#keepUntil) return;
    this.#registeredAt = -Infinity;
    await this.#backend.registerHolder(holderRegistryKey(this.#prefix, this.#tag), this.#who, 0).catch(() => {});
  }

  /** The description of the manager with tag `tag`, when known without asking the backend. */
  known(tag: string | undefined): string | undefined {
    if (tag === undefined) return undefined;
    return tag === this.#tag ? this.#who : this.#known.get(tag);
  }

  /** The description of the manager with tag `tag`, looked up once (at a time) and kept; null when none is registered. */
  resolve(tag: string): Promise<string | null> {
    const known = this.known(tag);
    if (known !== undefined) return Promise.resolve(known);
    let lookup = this.#lookups.get(tag);
    if (!lookup) {
      lookup = this.#backend
        .lookupHolder(holderRegistryKey(this.#prefix, tag))
        .then((who) => {
          if (who !== null) {
            if (this.#known.size >= KNOWN_MAX) this.#known.delete(this.#known.keys().next().value!);
            this.#known.set(tag, who);
          }
          return who;
        })
        .finally(() => this.#lookups.delete(tag));
      this.#lookups.set(tag, lookup);
    }
    return lookup;
  }

  /** Who holds the lock of `snapshot`, when its token names a manager that registered. */
  async holderOf(snapshot: LockSnapshot): Promise<HolderInfo | null> {
    const tag = holderTag(snapshot.token);
    if (tag === undefined) return null;
    const who = await this.resolve(tag).catch(() => null);
    return who === null ? null : { who, since: snapshot.since };
  }
}

/** How long a wait that timed out waits for the lookup of who holds the lock, at most, ms: one round trip on a live Redis. */
const LOOKUP_WAIT = 50;

/**
 * What a waiter saw of a lock's holder: the tag of the last busy reply, and who that is once
 * known (a timeout's message names it). Looked up in the background, once per manager met.
 */
export class HolderSighting {
  readonly #names: HolderNames;
  #tag: string | undefined;
  #lookup: Promise<unknown> | undefined;
  /** Who held the lock at the last attempt that found it held, when known. */
  who: string | undefined;

  constructor(names: HolderNames) {
    this.#names = names;
  }

  /** A busy reply named `tag`; `lookUp`: find who that is if not known yet (a wait that can time out). */
  note(tag: string | undefined, lookUp: boolean): void {
    this.#tag = tag;
    this.who = this.#names.known(tag);
    if (tag === undefined || this.who !== undefined || !lookUp) return;
    this.#lookup = this.#names.resolve(tag).then(
      (who) => {
        if (this.#tag === tag) this.who = who ?? undefined;
      },
      () => {},
    );
  }

  /** Resolves once a lookup in flight answered, or after {@link LOOKUP_WAIT} ms: for the timeout's message. */
  async settled(): Promise<void> {
    if (!this.#lookup || this.who !== undefined || this.#tag === undefined) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.#lookup, new Promise<void>((resolve) => (timer = setTimeout(resolve, LOOKUP_WAIT)))]);
    clearTimeout(timer);
  }
}
