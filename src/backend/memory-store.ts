import type { AcquireReply, Backend, FencedValue, FencedWriteReply, OwnershipReply } from './backend.js';
import type { LockKeys } from '../keys.js';
import { now } from '../clock.js';

interface Held {
  token: string;
  /** Monotonic ms. */
  expiresAt: number;
  fence: number;
}

/** Microseconds since the epoch on this process's monotonic clock: never goes back. */
const clockMicros = (): number => Math.floor((performance.timeOrigin + performance.now()) * 1000);

const SWEEP_EVERY = 1024;

/**
 * The in-memory store: the same semantics as the Redis backend (tokens compared on release and
 * extend, expiry on the monotonic clock, fences from a clock so they never repeat), for tests
 * and single-process apps. Managers that share one store exclude each other.
 */
export class MemoryStore {
  readonly #locks = new Map<string, Held>();
  readonly #resources = new Map<string, FencedValue>();
  readonly #watchers = new Map<string, Set<() => void>>();
  #lastFence = 0;
  #sinceSweep = 0;

  /** How many locks are held right now (expired ones are not counted). */
  get size(): number {
    this.#sweep();
    return this.#locks.size;
  }

  acquire(key: string, token: string, ttl: number): AcquireReply {
    if (++this.#sinceSweep >= SWEEP_EVERY) this.#sweep();
    const t = now();
    const held = this.#live(key, t);
    if (held) {
      if (held.token !== token) return { acquired: false, ttl: Math.max(1, Math.ceil(held.expiresAt - t)) };
      held.expiresAt = t + ttl;
      return { acquired: true, fence: held.fence };
    }
    // One counter for the whole store: strictly increasing per key as well.
    const fence = Math.max(this.#lastFence + 1, clockMicros());
    this.#lastFence = fence;
    this.#locks.set(key, { token, expiresAt: t + ttl, fence });
    return { acquired: true, fence };
  }

  release(key: string, token: string): OwnershipReply {
    const held = this.#live(key, now());
    if (!held) return 'gone';
    if (held.token !== token) return 'taken';
    this.#locks.delete(key);
    this.#announce(key);
    return 'ok';
  }

  extend(key: string, token: string, ttl: number): OwnershipReply {
    const t = now();
    const held = this.#live(key, t);
    if (!held) return 'gone';
    if (held.token !== token) return 'taken';
    held.expiresAt = t + ttl;
    return 'ok';
  }

  /** Deletes a lock whoever holds it (an operator's escape hatch, and tests that lose leases on purpose). */
  forceRelease(key: string): boolean {
    const existed = this.#live(key, now()) !== undefined;
    this.#locks.delete(key);
    return existed;
  }

  fencedWrite(resource: string, value: string, fence: number): FencedWriteReply {
    const current = this.#resources.get(resource);
    if (current && current.fence > fence) return { accepted: false, highest: current.fence };
    this.#resources.set(resource, { value, fence });
    return { accepted: true, highest: fence };
  }

  fencedRead(resource: string): FencedValue | null {
    return this.#resources.get(resource) ?? null;
  }

  watch(key: string, listener: () => void): () => void {
    let set = this.#watchers.get(key);
    if (!set) this.#watchers.set(key, (set = new Set()));
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.#watchers.get(key) === set) this.#watchers.delete(key);
    };
  }

  #announce(key: string): void {
    const set = this.#watchers.get(key);
    if (set) for (const listener of [...set]) listener();
  }

  #live(key: string, t: number): Held | undefined {
    const held = this.#locks.get(key);
    if (held && held.expiresAt <= t) {
      this.#locks.delete(key);
      return undefined;
    }
    return held;
  }

  #sweep(): void {
    this.#sinceSweep = 0;
    const t = now();
    for (const [key, held] of this.#locks) if (held.expiresAt <= t) this.#locks.delete(key);
  }
}

/** Creates an in-memory store to share between managers of one process: `createLocks({ memory: store })`. */
export function createMemoryStore(): MemoryStore {
  return new MemoryStore();
}

/** The backend over a {@link MemoryStore}. Replies are async, like a real store's. */
export function memoryBackend(store: MemoryStore): Backend {
  return {
    name: 'memory',
    acquire: async (keys: LockKeys, token, ttl) => store.acquire(keys.lock, token, ttl),
    release: async (keys, token) => store.release(keys.lock, token),
    extend: async (keys, token, ttl) => store.extend(keys.lock, token, ttl),
    fencedWrite: async (resource, value, fence) => store.fencedWrite(resource, value, fence),
    fencedRead: async (resource) => store.fencedRead(resource),
    watchReleases: async (keys, listener) => store.watch(keys.lock, listener),
    close: async () => {},
  };
}
