/**
 * What the lease-end and reentrancy contracts set up alike: the backend's harness (made before
 * their tests, closed after them), a key prefix per test, and managers under that prefix.
 */
import { afterAll, beforeAll } from 'vitest';
import type { Locks } from '../../src/index.js';
import { uniquePrefix, type BackendHarness, type LocksSettings } from '../helpers/harness.js';

export interface ContractHarness {
  /** The backend's harness (inside tests). */
  readonly h: BackendHarness;
  /** The current test's key prefix (see `fresh`). */
  readonly prefix: string;
  /** A manager on the shared backend, under the current prefix. */
  locks(settings?: LocksSettings): Locks;
  /** Starts a test on a prefix of its own. */
  fresh(): void;
}

export function contractHarness(makeHarness: () => Promise<BackendHarness>): ContractHarness {
  let h: BackendHarness | undefined;
  let prefix = uniquePrefix();
  beforeAll(async () => {
    h = await makeHarness();
  });
  afterAll(async () => {
    await h?.close();
  });
  return {
    get h() {
      if (!h) throw new Error('the harness is made in beforeAll: use it inside tests');
      return h;
    },
    get prefix() {
      return prefix;
    },
    locks: (settings = {}) => h!.locks({ prefix, ...settings }),
    fresh: () => {
      prefix = uniquePrefix();
    },
  };
}
