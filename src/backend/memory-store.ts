import type {
  AcquireReply,
  Backend,
  FencedValue,
  FencedWriteReply,
  HandOff,
  LockSnapshot,
  MultiAcquireReply,
  OwnershipReply,
  QueueEntry,
  ReleaseReply,
} from './backend.js';
import { managerInbox } from './backend.js';
import { now } from '../clock.js';
import { globToRegExp } from '../glob.js';
import { escapeGlob, namesOf, type SemaphoreSpec } from '../keys.js';
import { holderTag } from '../token.js';

interface Entry {
  token: string;
  /** Monotonic ms. */
  expiresAt: number;
  fence: number;
}

/** A queued waiter: until when its entry lives (monotonic ms), and what a grant needs. */
interface Queued {
  deadline: number;
  ttl: number;
  token: string;
}

/** Microseconds since the epoch on this process's monotonic clock: never goes back. */
const clockMicros = (): number => Math.floor((performance.timeOrigin + performance.now()) * 1000);

const SWEEP_EVERY = 1024;

/** A counting semaphore: its holders by token, and its waiters in arrival order. */
interface Semaphore {
  readonly holders: Map<string, { readonly permits: number; expiresAt: number; readonly fence: number }>;
  readonly queue: Map<string, Queued>;
}

/**
 * The in-memory store: the same semantics as the Redis backend (tokens compared on release and
 * extend, expiry on the monotonic clock, fences that never repeat, a wait queue with grants
 * and hand-off), for tests and single-process apps. Managers that share one store
 * exclude each other; separate stores do not.
 */
export class MemoryStore {
  readonly #locks = new Map<string, Entry>();
  /** Per lock: queued waiters in arrival order. */
  readonly #queues = new Map<string, Map<string, Queued>>();
  readonly #inboxes = new Map<string, (member: string, fence: number) => void>();
  readonly #resources = new Map<string, FencedValue>();
  /** Who each manager is (see registerHolder), until when (monotonic ms). */
  readonly #holders = new Map<string, { readonly who: string; readonly expiresAt: number }>();
  readonly #semaphores = new Map<string, Semaphore>();
  #lastFence = 0;
  #sinceSweep = 0;

  /** How many locks are held right now. */
  get size(): number {
    this.#sweep();
    return this.#locks.size;
  }

  /** @internal Used by the memory backend. */
  acquire(key: string, token: string, ttl: number, queue?: QueueEntry): AcquireReply {
    if (++this.#sinceSweep >= SWEEP_EVERY) this.#sweep();
    const t = now();
    const entry = this.#live(key, t);
    if (entry?.token === token) {
      entry.expiresAt = t + ttl;
      return { acquired: true, fence: entry.fence };
    }
    if (!entry) {
      if (queue) this.#queues.get(key)?.delete(queue.member);
      return { acquired: true, fence: this.#grant(key, token, t + ttl) };
    }
    if (queue) {
      let waiters = this.#queues.get(key);
      if (!waiters) this.#queues.set(key, (waiters = new Map()));
      const queued = waiters.get(queue.member); // keeps its place when already queued
      if (queued) queued.deadline = t + queue.entryTtl;
      else waiters.set(queue.member, { deadline: t + queue.entryTtl, ttl, token });
    }
    const ttlLeft = Math.max(1, Math.ceil(entry.expiresAt - t));
    const tag = holderTag(entry.token);
    return tag ? { acquired: false, ttl: ttlLeft, holderTag: tag } : { acquired: false, ttl: ttlLeft };
  }

  /** @internal Used by the memory backend: multi-acquire.lua's semantics (all free locks taken, or nothing written). */
  acquireAll(keys: readonly string[], token: string, ttl: number): MultiAcquireReply {
    const t = now();
    for (const [i, key] of keys.entries()) {
      const entry = this.#live(key, t);
      if (entry) return { acquired: false, busy: i, ttl: Math.max(1, Math.ceil(entry.expiresAt - t)) };
    }
    return { acquired: true, fences: keys.map((key) => this.#grant(key, token, t + ttl)) };
  }

  /** @internal Used by the memory backend. */
  release(key: string, token: string, handOff?: HandOff): ReleaseReply {
    const t = now();
    const entry = this.#live(key, t);
    if (!entry) return 'gone';
    if (entry.token !== token) return 'taken';
    if (!handOff || handOff.passOn) {
      // Grant to the oldest live waiter whose manager listens (one that does not is skipped).
      const waiters = this.#queues.get(key);
      for (const [member, queued] of waiters ?? []) {
        waiters!.delete(member);
        const inbox = this.#inboxes.get(member.slice(0, member.lastIndexOf(':')));
        if (queued.deadline <= t || !inbox) continue;
        const fence = this.#grant(key, queued.token, t + queued.ttl);
        queueMicrotask(() => inbox(member, fence));
        return 'ok';
      }
    }
    if (!handOff) {
      this.#locks.delete(key);
      return 'ok';
    }
    return { handedOff: this.#grant(key, handOff.token, t + handOff.ttl) };
  }

  /** @internal Used by the memory backend. */
  extend(key: string, token: string, ttl: number): OwnershipReply {
    const t = now();
    const entry = this.#live(key, t);
    if (!entry) return 'gone';
    if (entry.token !== token) return 'taken';
    entry.expiresAt = t + ttl;
    return 'ok';
  }

  /** @internal Used by the memory backend. */
  leave(key: string, member: string, token: string): boolean {
    const waiters = this.#queues.get(key);
    waiters?.delete(member);
    if (waiters?.size === 0) this.#queues.delete(key);
    return this.#live(key, now())?.token === token;
  }

  /** How many waiters are queued for a lock (for status views and tests). */
  queueLength(key: string): number {
    return this.#queues.get(key)?.size ?? 0;
  }

  /** Deletes a lock whoever holds it (an operator's escape hatch, and tests that lose leases on purpose). */
  forceRelease(key: string): boolean {
    const existed = this.#live(key, now()) !== undefined;
    this.#locks.delete(key);
    return existed;
  }

  /** @internal Used by the memory backend: semaphore-acquire.lua's semantics. */
  semaphoreAcquire(key: string, token: string, ttl: number, spec: SemaphoreSpec, queue?: QueueEntry): AcquireReply {
    if (++this.#sinceSweep >= SWEEP_EVERY) this.#sweep();
    const t = now();
    const sem = this.#semaphore(key, t);
    const mine = sem.holders.get(token);
    if (mine) {
      mine.expiresAt = t + ttl;
      return { acquired: true, fence: mine.fence };
    }
    let used = 0;
    for (const h of sem.holders.values()) used += h.permits;
    const head = this.#firstLive(sem, t);
    if ((head === undefined || head === queue?.member) && used + spec.permits <= spec.limit) {
      const fence = Math.max(this.#lastFence + 1, clockMicros());
      this.#lastFence = fence;
      sem.holders.set(token, { permits: spec.permits, expiresAt: t + ttl, fence });
      if (queue) sem.queue.delete(queue.member);
      if (used + spec.permits < spec.limit) this.#wakeFirst(sem, t);
      return { acquired: true, fence };
    }
    if (queue) {
      const queued = sem.queue.get(queue.member);
      if (queued) queued.deadline = t + queue.entryTtl;
      else sem.queue.set(queue.member, { deadline: t + queue.entryTtl, ttl, token });
    }
    if (used + spec.permits > spec.limit) {
      let earliest = Infinity;
      for (const h of sem.holders.values()) earliest = Math.min(earliest, h.expiresAt);
      if (earliest !== Infinity) return { acquired: false, ttl: Math.max(1, Math.ceil(earliest - t)) };
    }
    return { acquired: false, ttl: 0 };
  }

  /** @internal Used by the memory backend. */
  semaphoreRelease(key: string, token: string): 'ok' | 'gone' {
    const t = now();
    const sem = this.#semaphore(key, t);
    if (!sem.holders.delete(token)) return 'gone';
    this.#wakeFirst(sem, t);
    return 'ok';
  }

  /** @internal Used by the memory backend. */
  semaphoreExtend(key: string, token: string, ttl: number): 'ok' | 'gone' {
    const t = now();
    const holder = this.#semaphore(key, t).holders.get(token);
    if (!holder) return 'gone';
    holder.expiresAt = t + ttl;
    return 'ok';
  }

  /** @internal Used by the memory backend. */
  semaphoreLeave(key: string, member: string, token: string): boolean {
    const t = now();
    const sem = this.#semaphore(key, t);
    const wasFirst = sem.queue.keys().next().value === member;
    sem.queue.delete(member);
    if (wasFirst) this.#wakeFirst(sem, t);
    return sem.holders.has(token);
  }

  /** How many waiters are queued for a semaphore (for tests). */
  semaphoreQueueLength(key: string): number {
    return this.#semaphores.get(key)?.queue.size ?? 0;
  }

  /** @internal How many permits of a semaphore are taken (tests). */
  permitsTaken(key: string): number {
    let used = 0;
    for (const h of this.#semaphore(key, now()).holders.values()) used += h.permits;
    return used;
  }

  /** A semaphore's state, without its expired holders. */
  #semaphore(key: string, t: number): Semaphore {
    let sem = this.#semaphores.get(key);
    if (!sem) this.#semaphores.set(key, (sem = { holders: new Map(), queue: new Map() }));
    for (const [token, h] of sem.holders) if (h.expiresAt <= t) sem.holders.delete(token);
    return sem;
  }

  #firstLive(sem: Semaphore, t: number): string | undefined {
    for (const [member, queued] of sem.queue) {
      if (queued.deadline > t) return member;
      sem.queue.delete(member);
    }
    return undefined;
  }

  /** Wakes the first live queued waiter whose manager listens ("<waiter> 0"), dropping dead ones. */
  #wakeFirst(sem: Semaphore, t: number): void {
    for (;;) {
      const member = this.#firstLive(sem, t);
      if (member === undefined) return;
      const inbox = this.#inboxes.get(member.slice(0, member.lastIndexOf(':')));
      if (inbox) {
        queueMicrotask(() => inbox(member, 0));
        return;
      }
      sem.queue.delete(member);
    }
  }

  /** @internal Used by the memory backend: see Backend.registerHolder. */
  registerHolder(key: string, who: string, ttl: number): void {
    if (ttl === 0) this.#holders.delete(key);
    else this.#holders.set(key, { who, expiresAt: now() + ttl });
  }

  /** @internal Used by the memory backend: see Backend.lookupHolder. */
  lookupHolder(key: string): string | null {
    const entry = this.#holders.get(key);
    if (entry && entry.expiresAt <= now()) this.#holders.delete(key);
    return entry && entry.expiresAt > now() ? entry.who : null;
  }

  /** @internal Used by the memory backend. */
  inspect(key: string): LockSnapshot {
    const t = now();
    const entry = this.#live(key, t);
    return {
      token: entry?.token ?? null,
      ttl: entry ? Math.max(1, Math.ceil(entry.expiresAt - t)) : 0,
      fence: entry?.fence ?? null,
      queued: this.queueLength(key),
      // A fence is this process's clock in µs when issued (or one more than the one before).
      since: entry ? Math.floor(entry.fence / 1000) : null,
    };
  }

  /** @internal Used by the memory backend: the keys of held locks. */
  heldKeys(): string[] {
    this.#sweep();
    return [...this.#locks.keys()];
  }

  /** @internal Used by the memory backend. */
  fencedWrite(resource: string, value: string, fence: number): FencedWriteReply {
    const current = this.#resources.get(resource);
    if (current && current.fence > fence) return { accepted: false, highest: current.fence };
    this.#resources.set(resource, { value, fence });
    return { accepted: true, highest: fence };
  }

  /** @internal Used by the memory backend. */
  fencedRead(resource: string): FencedValue | null {
    return this.#resources.get(resource) ?? null;
  }

  /** @internal Used by the memory backend. */
  watchInbox(managerId: string, listener: (member: string, fence: number) => void): () => void {
    this.#inboxes.set(managerId, listener);
    return () => {
      if (this.#inboxes.get(managerId) === listener) this.#inboxes.delete(managerId);
    };
  }

  /** One counter for the whole store: strictly increasing per lock as well. */
  #grant(key: string, token: string, expiresAt: number): number {
    const fence = Math.max(this.#lastFence + 1, clockMicros());
    this.#lastFence = fence;
    this.#locks.set(key, { token, expiresAt, fence });
    return fence;
  }

  #live(key: string, t: number): Entry | undefined {
    const entry = this.#locks.get(key);
    if (entry && entry.expiresAt <= t) {
      this.#locks.delete(key);
      return undefined;
    }
    return entry;
  }

  #sweep(): void {
    this.#sinceSweep = 0;
    const t = now();
    for (const [key, entry] of this.#locks) if (entry.expiresAt <= t) this.#locks.delete(key);
    for (const [key, waiters] of this.#queues) {
      for (const [member, queued] of waiters) if (queued.deadline <= t) waiters.delete(member);
      if (waiters.size === 0) this.#queues.delete(key);
    }
    for (const [key, sem] of this.#semaphores) {
      this.#semaphore(key, t);
      this.#firstLive(sem, t);
      if (sem.holders.size === 0 && sem.queue.size === 0) this.#semaphores.delete(key);
    }
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
    handsOff: true,
    boundsCalls: true, // in-process: every call ends at once
    semaphores: true,
    acquireAll: async (keys, token, ttl) => store.acquireAll(keys.map((k) => k.lock), token, ttl),
    acquire: async (keys, token, ttl, queue) =>
      keys.semaphore ? store.semaphoreAcquire(keys.lock, token, ttl, keys.semaphore, queue) : store.acquire(keys.lock, token, ttl, queue),
    release: async (keys, token, handOff) => (keys.semaphore ? store.semaphoreRelease(keys.lock, token) : store.release(keys.lock, token, handOff)),
    extend: async (keys, token, ttl) => (keys.semaphore ? store.semaphoreExtend(keys.lock, token, ttl) : store.extend(keys.lock, token, ttl)),
    extendMany: async (items) =>
      items.map((item) => (item.keys.semaphore ? store.semaphoreExtend(item.keys.lock, item.token, item.ttl) : store.extend(item.keys.lock, item.token, item.ttl))),
    leave: async (keys, member, token) => (keys.semaphore ? store.semaphoreLeave(keys.lock, member, token) : store.leave(keys.lock, member, token)),
    registerHolder: async (key, who, ttl) => store.registerHolder(key, who, ttl),
    lookupHolder: async (key) => store.lookupHolder(key),
    inspect: async (keys) => store.inspect(keys.lock),
    lockNames: async (prefix, pattern) => {
      const match = globToRegExp(`${escapeGlob(prefix)}{${pattern}}`);
      return namesOf(store.heldKeys().filter((key) => match.test(key)), prefix);
    },
    fencedWrite: async (resource, value, fence) => store.fencedWrite(resource, value, fence),
    fencedRead: async (resource) => store.fencedRead(resource),
    watchInbox: async (managerId, listener) => {
      const stop = store.watchInbox(managerId, listener);
      return managerInbox(async () => stop());
    },
    close: async () => {},
  };
}
