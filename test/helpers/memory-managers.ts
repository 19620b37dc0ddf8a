/** Managers on an in-memory store for the unit tests that wrap the chosen backend (see wrapped-backend.ts), closed after each test. */
import { afterEach } from 'vitest';
import { createLocks, createMemoryStore, type Locks, type MemoryStore } from '../../src/index.js';

/** A manager on `store` (recheck 100 ms, or `recheck`), closed after the test, after `reset` put the switches back. */
export function memoryManagers(reset: () => void, recheck = 100): (store?: MemoryStore) => Locks {
  const made: Locks[] = [];
  afterEach(async () => {
    reset();
    for (const locks of made.splice(0)) await locks.close();
  });
  return (store = createMemoryStore()) => {
    const locks = createLocks({ memory: store, recheck });
    made.push(locks);
    return locks;
  };
}
