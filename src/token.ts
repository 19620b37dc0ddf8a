import { randomBytes } from 'node:crypto';

/** Bytes of randomness in a lease token: 128 bits. */
export const TOKEN_BYTES = 16;

/** A fresh lease token: 128 bits from the operating system's CSPRNG, hex-encoded. */
export function newToken(): string {
  return randomBytes(TOKEN_BYTES).toString('hex');
}
