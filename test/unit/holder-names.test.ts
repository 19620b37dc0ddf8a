/** A manager's holder registration: written on its first lease, then at most hourly, for a day; nothing with `holder: false`. */
import { describe, expect, it } from 'vitest';
import type { Backend } from '../../src/backend/backend.js';
import { createMemoryStore, memoryBackend } from '../../src/backend/memory-store.js';
import { HolderNames, REGISTER_EVERY, REGISTRATION_TTL } from '../../src/holder-names.js';
import { holderRegistryKey } from '../../src/keys.js';

/** Every promise job queued by now has run. */
const settled = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

interface Registration {
  readonly key: string;
  readonly who: string;
  readonly ttl: number;
}

/** The in-memory backend (a product feature), its registrations recorded; `fail` makes the next one reject. */
function recording(): { backend: Backend; registrations: Registration[]; failNext: () => void } {
  const inner = memoryBackend(createMemoryStore());
  const registrations: Registration[] = [];
  let fail = false;
  const backend: Backend = {
    ...inner,
    registerHolder: async (key, who, ttl) => {
      registrations.push({ key, who, ttl });
      if (fail) {
        fail = false;
        throw new Error('refused');
      }
      return inner.registerHolder(key, who, ttl);
    },
  };
  return { backend, registrations, failNext: () => (fail = true) };
}

describe('HolderNames', () => {
  it('registers on the first lease for a day, then at most once every hour of leases', async () => {
    const { backend, registrations } = recording();
    const names = new HolderNames(backend, 'app:', 'cafe0123', 'billing');
    names.touch(1_000);
    names.touch(1_001);
    names.touch(1_000 + REGISTER_EVERY - 1);
    expect(registrations).toEqual([{ key: holderRegistryKey('app:', 'cafe0123'), who: 'billing', ttl: REGISTRATION_TTL }]);
    expect(REGISTRATION_TTL).toBe(24 * 60 * 60 * 1000);
    expect(REGISTER_EVERY).toBe(60 * 60 * 1000);
    names.touch(1_000 + REGISTER_EVERY);
    expect(registrations).toHaveLength(2);
    await settled();
    await expect(backend.lookupHolder(holderRegistryKey('app:', 'cafe0123'))).resolves.toBe('billing');
  });

  it('registers nothing when the manager names no holder (holder: false)', () => {
    const { backend, registrations } = recording();
    const names = new HolderNames(backend, 'app:', 'cafe0123', undefined);
    names.touch(1_000);
    names.touch(1_000 + 2 * REGISTER_EVERY);
    expect(registrations).toEqual([]);
  });

  it('tries a failed registration again with the next lease, not an hour later', async () => {
    const { backend, registrations, failNext } = recording();
    const names = new HolderNames(backend, 'app:', 'cafe0123', 'billing');
    failNext();
    names.touch(1_000);
    await settled();
    names.touch(1_001);
    expect(registrations).toHaveLength(2);
    await settled();
    await expect(backend.lookupHolder(holderRegistryKey('app:', 'cafe0123'))).resolves.toBe('billing');
  });
});
