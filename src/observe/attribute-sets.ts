import type { Attributes } from '@opentelemetry/api';
import { errorSummary } from './error-fields.js';
import type { LockKind, Logger } from './types.js';

/** Most attribute sets kept: kinds x outcomes x reasons x the groups `keyGroup` makes (low cardinality by contract). */
const SETS_KEPT = 10_000;

/**
 * The attributes of a manager's metrics, and (copied) its spans' first ones: never the lock name
 * itself (unbounded cardinality, and names can carry ids such as `orders:42` or an e-mail
 * address) nor a token, at most its `keyGroup` group. Made once per combination and reused.
 */
export class AttributeSets {
  readonly #prefix: string;
  readonly #backend: string;
  readonly #keyGroup: ((key: string) => string) | undefined;
  /** Told when `keyGroup` throws. */
  readonly #logger: Logger | undefined;
  readonly #cache = new Map<string, Attributes>();

  constructor(prefix: string, backend: string, keyGroup: ((key: string) => string) | undefined, logger: Logger | undefined) {
    this.#prefix = prefix;
    this.#backend = backend;
    this.#keyGroup = keyGroup;
    this.#logger = logger;
  }

  /** The attributes of `kind` and `key`'s group; one more attribute `name` = `value`, and `latchkey.contended` for an acquire. */
  of(kind: LockKind, key: string, name?: string, value?: string, contended?: boolean): Attributes {
    const group = this.#group(key);
    const id = `${kind}\0${name ?? ''}\0${value ?? ''}\0${contended ?? ''}\0${group ?? ''}`;
    let attributes = this.#cache.get(id);
    if (!attributes) {
      const made: Attributes = { 'latchkey.kind': kind, 'latchkey.prefix': this.#prefix, 'latchkey.backend': this.#backend };
      if (name !== undefined) made[name] = value;
      if (contended !== undefined) made['latchkey.contended'] = contended;
      if (group !== undefined) made['latchkey.key.group'] = group;
      if (this.#cache.size < SETS_KEPT) this.#cache.set(id, made);
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
}
