import type { LockKeys } from '../keys.js';

/** What one acquire attempt found. */
export type AcquireReply =
  | { readonly acquired: true; readonly fence: number }
  /** `ttl`: the holder's remaining time to live in ms, or -1 when unknown (a key with no expiry). */
  | { readonly acquired: false; readonly ttl: number };

/** What a release or extend found: done, the key gone, or the key held by another token. */
export type OwnershipReply = 'ok' | 'gone' | 'taken';

/** What a fenced write found. */
export interface FencedWriteReply {
  readonly accepted: boolean;
  /** The highest fence the resource has accepted, after this write. */
  readonly highest: number;
}

/** A value stored with {@link Backend.fencedWrite}. */
export interface FencedValue {
  readonly value: string;
  readonly fence: number;
}

/**
 * Where locks live. Each primitive is written once against this interface; a topology (one Redis,
 * the in-memory store, later Redlock and Cluster) is a backend. Methods reject with a
 * {@link BackendError} when the store fails, never with the driver's raw error.
 */
export interface Backend {
  /** Human-readable name for messages: `redis (ioredis)`, `memory`. */
  readonly name: string;
  acquire(keys: LockKeys, token: string, ttl: number): Promise<AcquireReply>;
  release(keys: LockKeys, token: string): Promise<OwnershipReply>;
  extend(keys: LockKeys, token: string, ttl: number): Promise<OwnershipReply>;
  fencedWrite(resource: string, value: string, fence: number): Promise<FencedWriteReply>;
  fencedRead(resource: string): Promise<FencedValue | null>;
  /**
   * Calls `listener` when a release of this lock is announced, until the returned function is
   * called. Resolves once the subscription is active, so a release after that is never missed
   * (except across a reconnect, reported by calling `listener` too).
   */
  watchReleases(keys: LockKeys, listener: () => void): Promise<() => void>;
  /** Frees what the backend owns (subscriber connections, a client made from a URL). */
  close(): Promise<void>;
}

/** How long a fence counter outlives the lease (ms). After that, the server clock alone keeps fences increasing. */
export const FENCE_RETENTION = 24 * 60 * 60 * 1000;
