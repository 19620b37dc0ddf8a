/** A multi-lease whose parts were all left to expire (Lease.letExpire): its release leaves it held, as a single lease's does. */
import { describe, expect, it } from 'vitest';
import { createLocks, createMemoryStore, LeaseLostError, type MultiLease } from '../../src/index.js';

describe('a multi-lease left to expire', () => {
  it('stays held after withLocks ends, its keys taken, and its signal aborts with the expiry at the TTL', async () => {
    const store = createMemoryStore();
    const locks = createLocks({ memory: store });
    const other = createLocks({ memory: store });
    let whole: MultiLease | undefined;
    await locks.withLocks(['a', 'b'], { ttl: 200, renew: false }, (all) => {
      whole = all;
      for (const part of all.leases) part.letExpire();
    });
    expect(whole!.state).toBe('held');
    expect(whole!.signal.aborted).toBe(false);
    expect(await other.tryAcquire('a')).toBeNull();
    const reason: unknown = await new Promise((resolve) => whole!.signal.addEventListener('abort', () => resolve(whole!.signal.reason), { once: true }));
    expect(reason).toBeInstanceOf(LeaseLostError);
    expect((reason as LeaseLostError).reason).toBe('expired');
    await Promise.all([locks.close(), other.close()]);
  });
});
