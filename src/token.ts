import { randomFillSync } from 'node:crypto';

/** Bytes of randomness in a lease token: 128 bits. */
export const TOKEN_BYTES = 16;
const POOL_TOKENS = 256;

/**
 * Fresh lease tokens: 128 bits each from the operating system's CSPRNG, hex-encoded. Randomness is
 * drawn 4 KiB at a time (one system call for 256 tokens); each byte is handed out once.
 */
export class TokenSource {
  readonly #pool = Buffer.allocUnsafe(TOKEN_BYTES * POOL_TOKENS);
  #next = POOL_TOKENS;

  next(): string {
    if (this.#next === POOL_TOKENS) {
      randomFillSync(this.#pool);
      this.#next = 0;
    }
    const start = this.#next++ * TOKEN_BYTES;
    return this.#pool.toString('hex', start, start + TOKEN_BYTES);
  }
}
