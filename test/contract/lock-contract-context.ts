/**
 * What the sections of the lock contract (test/contract/lock-contract.ts) share: the backend's
 * capabilities, its harness (made before the tests, closed after them), the current test's key
 * prefix, managers under that prefix, and the helpers that wait for a backend's queue.
 */
import { afterAll, beforeAll, it } from 'vitest';
import { once } from 'node:events';
import type { Locks } from '../../src/index.js';
import type { SemaphoreKind } from '../../src/keys.js';
import { uniquePrefix, type BackendHarness, type LocksSettings } from '../helpers/harness.js';

/** Resolves when `signal` aborts, with its reason. */
export async function aborted(signal: AbortSignal): Promise<unknown> {
  if (!signal.aborted) await once(signal, 'abort');
  return signal.reason;
}

const strategies = ['notify', 'backoff'] as const;

/** What a backend does beyond the common contract; tests of a capability run only where it exists. */
export interface Capabilities {
  /**
   * A release passes the lock on by itself: hands it to a waiter of the releasing process, or
   * grants it to a queued waiter of another. Redlock's releases only wake the next waiter, which
   * then asks the quorum (test/integration/redlock-quorum.test.ts covers what it does instead).
   */
  readonly handsOff: boolean;
  /** `fencedWrite`/`fencedRead` work (not over Redlock: a fenced resource lives on one Redis). */
  readonly fencedWrites: boolean;
  /** Counting semaphores work (not over Redlock: permits counted per node cannot be decided by a majority). */
  readonly semaphores: boolean;
  /**
   * `list` works. Not in compat mode: its lock keys are the legacy services' own keys, with no
   * latchkey prefix or hash tag to scan for, and `list` rejects with an UnsupportedError there
   * (test/integration/compat-timestamp.test.ts checks that).
   */
  readonly list?: boolean;
}

/** Registers a test where the backend has the capability, and nothing where it lacks it. */
export type ItIf = (capable: boolean) => typeof it | ((name: string, fn: () => Promise<void>) => void);

/** What every section of the lock contract receives from lockContract. */
export interface LockContractContext {
  /** What the backend does beyond the common contract. */
  readonly can: Capabilities;
  /** `it` for a test of a capability: a test the backend lacks the capability for is not registered. */
  readonly itIf: ItIf;
  /** The waiting strategies a test runs under, one test each. */
  readonly strategies: typeof strategies;
  /** The backend's harness (made in beforeAll: read it inside tests). */
  readonly h: BackendHarness;
  /** The current test's key prefix (set by `fresh`). */
  readonly prefix: string;
  /** A manager on the shared backend, under the current prefix. */
  locks(settings?: LocksSettings): Locks;
  /** Resolves once `count` waiters are queued for the lock in the backend (polls). */
  queued(name: string, count?: number): Promise<void>;
  /** Resolves once `count` waiters are queued for the semaphore in the backend (polls). */
  queuedFor(name: string, kind?: SemaphoreKind, count?: number): Promise<void>;
  /** Starts a test on a key prefix of its own. */
  fresh(): void;
}

/**
 * Makes the context of lockContract's sections: registers the hooks that make the harness before
 * the tests and close it after them. `h` and `prefix` are read when a test runs, not when it is
 * registered.
 */
export function lockContractContext(makeHarness: () => Promise<BackendHarness>, can: Capabilities): LockContractContext {
  // A test of a capability the backend lacks is not registered (not skipped): it does not apply.
  const itIf = (capable: boolean) => (capable ? it : (_name: string, _fn: () => Promise<void>): void => undefined);
  let h: BackendHarness;
  let prefix: string;
  const locks = (settings: Parameters<BackendHarness['locks']>[0] = {}): Locks => h.locks({ prefix, ...settings });

  beforeAll(async () => {
    h = await makeHarness();
  });
  afterAll(async () => {
    await h.close();
  });
  /**
   * Resolves once `count` waiters are queued for the lock in the backend. Polls: a waiter's
   * queueing happens inside the backend, and no event of the public API announces it.
   */
  const queued = async (name: string, count = 1): Promise<void> => {
    const end = performance.now() + 5000;
    while ((await h.queued(prefix, name)) < count) {
      if (performance.now() > end) throw new Error(`no ${count} waiter(s) queued for "${name}" within 5 s`);
      await new Promise((r) => setTimeout(r, 2));
    }
  };
  /** Resolves once a waiter is queued for the semaphore in the backend (polls, like `queued`). */
  const queuedFor = async (name: string, kind: SemaphoreKind = 'sem', count = 1): Promise<void> => {
    const end = performance.now() + 5000;
    while ((await h.semaphoreQueued(prefix, name, kind)) < count) {
      if (performance.now() > end) throw new Error(`no waiter queued for semaphore "${name}" within 5 s`);
      await new Promise((r) => setTimeout(r, 2));
    }
  };
  // A fresh prefix per test keeps tests apart without flushing anything.
  const fresh = (): void => {
    prefix = uniquePrefix();
  };

  return {
    can,
    itIf,
    strategies,
    get h() {
      return h;
    },
    get prefix() {
      return prefix;
    },
    locks,
    queued,
    queuedFor,
    fresh,
  };
}
