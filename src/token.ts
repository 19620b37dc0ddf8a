import { randomFillSync } from 'node:crypto';

/** Bytes of randomness in a lease token: 128 bits. */
export const TOKEN_BYTES = 16;
/** Hex digits of a manager's tag, the first part of each of its tokens. */
export const TAG_LENGTH = 8;
/** Hex digits of a tagged token: the tag, then 128 random bits. */
export const TAGGED_TOKEN_LENGTH = TAG_LENGTH + TOKEN_BYTES * 2;
const POOL_TOKENS = 256;

/** A manager's tag: 32 random bits, hex. It is not secret (a busy reply names it); a token's random part is. */
export function newTag(): string {
  return randomFillSync(Buffer.allocUnsafe(TAG_LENGTH / 2)).toString('hex');
}

/** The tag of the manager that made `token` (see {@link TokenSource}), if it has one. */
export function holderTag(token: string | null | undefined): string | undefined {
  return token?.length === TAGGED_TOKEN_LENGTH && /^[0-9a-f]+$/.test(token) ? token.slice(0, TAG_LENGTH) : undefined;
}

/**
 * Fresh lease tokens: the manager's tag (which says who holds a lock: see `registerHolder`), then
 * 128 bits from the operating system's CSPRNG, hex-encoded. Randomness is drawn 4 KiB at a time
 * (one system call for 256 tokens); each byte is handed out once.
 */
export class TokenSource {
  readonly #pool = Buffer.allocUnsafe(TOKEN_BYTES * POOL_TOKENS);
  readonly #tag: string;
  #next = POOL_TOKENS;

  constructor(tag: string = newTag()) {
    this.#tag = tag;
  }

  /** The manager's tag, the first {@link TAG_LENGTH} hex digits of every token. */
  get tag(): string {
    return this.#tag;
  }

  next(): string {
    if (this.#next === POOL_TOKENS) {
      randomFillSync(this.#pool);
      this.#next = 0;
    }
    const start = this.#next++ * TOKEN_BYTES;
    return this.#tag + this.#pool.toString('hex', start, start + TOKEN_BYTES);
  }
}
