/** Multi-locks inside reentrant scopes (in-memory backend): a joined part whose scope ends meanwhile, and the whole's signal on joined parts. */
import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { createLocks, createMemoryStore, type MultiLease } from '../../src/index.js';

describe('a multi-lock that joins a reentrant scope', () => {
  it('takes a key again, in order, when the scope that held it ended while the other keys were waited for', async () => {
    const store = createMemoryStore();
    const locks = createLocks({ memory: store, reentrant: true });
    const other = createLocks({ memory: store });
    const b = await other.acquire('b');
    let taking: Promise<MultiLease> | undefined;
    await locks.withLock('a', async () => {
      taking = locks.acquireAll(['a', 'b'], { wait: 5_000 }); // joins the scope's "a", waits for "b"
      await Promise.resolve();
    }); // the scope ends: "a" is released while the multi-lock still waits
    await b.release();
    const all = await taking!;
    expect(all.held).toBe(true);
    expect(all.leases.every((part) => part.state === 'held')).toBe(true);
    expect(await other.tryAcquire('a')).toBeNull(); // the whole is really held
    await all.release();
    await Promise.all([locks.close(), other.close()]);
  });

  it('leaves no listener on a joined part\'s signal once the whole is released', async () => {
    const locks = createLocks({ reentrant: true });
    await locks.withLock('a', async (scope) => {
      const before = getEventListeners(scope.signal, 'abort').length;
      for (let i = 0; i < 3; i++) {
        await locks.withLocks(['a', `b${i}`], (all) => {
          expect(all.signal.aborted).toBe(false);
        });
      }
      expect(getEventListeners(scope.signal, 'abort')).toHaveLength(before);
    });
    await locks.close();
  });
});
