/** The in-memory backend's scope: one store, one set of locks. */
import { describe, expect, it } from 'vitest';
import { createLocks, createMemoryStore } from '../../src/index.js';

describe('in-memory stores', () => {
  it('managers sharing a store exclude each other; separate stores do not', async () => {
    const store = createMemoryStore();
    const [a, b, c] = [createLocks({ memory: store }), createLocks({ memory: store }), createLocks()];
    const held = await a.acquire('shared');
    expect(await b.tryAcquire('shared')).toBeNull();
    const elsewhere = await c.tryAcquire('shared');
    expect(elsewhere).not.toBeNull();
    await elsewhere!.release();
    await held.release();
  });
});
