/**
 * Redlock over five independent redis-server processes, some killed or hung: a minority down or
 * hung changes nothing (a hung node is waited for once), a majority gives a QuorumError within the
 * wait, and no key is left behind when the nodes return.
 */
import { describe, expect, it } from 'vitest';
import { QuorumError, type Locks } from '../../src/index.js';
import { lockKeys } from '../../src/keys.js';
import { uniquePrefix } from '../helpers/fixtures.js';
import { eventually, useRedlockNodes } from '../helpers/redlock-nodes.js';

const { servers: five, raws: fiveRaw, redlock } = useRedlockNodes(5);

describe('Redlock over five nodes, some killed or hung', () => {
  const redlock5 = (settings: { prefix: string; nodeTimeout: number }): Locks => redlock(settings, five);

  const noKeyLeft = async (prefix: string, name: string): Promise<boolean> =>
    (await Promise.all(fiveRaw.map((r) => r.exists(lockKeys(prefix, name).lock)))).every((n) => n === 0);

  it('keeps working with 2 of 5 killed, fails cleanly with 3, recovers when they return, fences increasing throughout', async () => {
    const prefix = uniquePrefix();
    const locks = redlock5({ prefix, nodeTimeout: 200 });
    const fences: number[] = [];
    const take = async (wait = 5000): Promise<void> => {
      const lease = await locks.acquire('k', { ttl: 5000, wait });
      fences.push(lease.fence);
      await lease.release();
    };
    await take();
    await Promise.all([five[3]!.kill(), five[4]!.kill()]);
    await take();
    await five[2]!.kill();
    const error = await locks.acquire('k', { ttl: 5000, wait: 300 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(QuorumError);
    expect((error as QuorumError).outcome).toMatchObject({ for: 2, errors: 3, quorum: 3 });
    // They come back empty (no persistence): fences still grow, and the lock works again.
    await Promise.all([five[2]!.restart(), five[3]!.restart(), five[4]!.restart()]);
    await take();
    await Promise.all([five[0]!.kill(), five[1]!.kill()]);
    await take();
    await Promise.all([five[0]!.restart(), five[1]!.restart()]);
    await take();
    for (let i = 1; i < fences.length; i++) expect(fences[i]).toBeGreaterThan(fences[i - 1]!);
    expect(await eventually(() => noKeyLeft(prefix, 'k'))).toBe(true);
  });

  it('with 2 of 5 hung, waits for them once, not on every call, and leaves no key behind when they resume', async () => {
    const prefix = uniquePrefix();
    const nodeTimeout = 200;
    const locks = redlock5({ prefix, nodeTimeout });
    await (await locks.acquire('warm', { ttl: 5000 })).release(); // connections up
    five[3]!.pause();
    five[4]!.pause();
    let resumed = false;
    try {
      const first = await locks.acquire('hung', { ttl: 5000 }); // waits for the hung nodes once
      await first.release();
      // If every call waited for the hung nodes, 20 acquire+release pairs would take at least 20 × 2 × 200 ms.
      const started = performance.now();
      for (let i = 0; i < 20; i++) await (await locks.acquire('hung', { ttl: 5000 })).release();
      expect(performance.now() - started).toBeLessThan(20 * nodeTimeout);
      five[3]!.resume();
      five[4]!.resume();
      resumed = true;
      // The queued commands run when they wake: every acquire they missed is followed by its release.
      const end = performance.now() + 3000;
      while (!(await noKeyLeft(prefix, 'hung')) && performance.now() < end) await new Promise((r) => setTimeout(r, 20));
      expect(await noKeyLeft(prefix, 'hung')).toBe(true);
    } finally {
      if (!resumed) {
        five[3]!.resume();
        five[4]!.resume();
      }
    }
  });

  it('with 3 of 5 hung, rejects within its wait with a QuorumError naming them, and leaves no key behind when they resume', async () => {
    const prefix = uniquePrefix();
    const locks = redlock5({ prefix, nodeTimeout: 100 });
    await (await locks.acquire('warm', { ttl: 5000 })).release();
    for (const i of [0, 2, 4]) five[i]!.pause();
    let resumed = false;
    try {
      const started = performance.now();
      const error = await locks.acquire('majority', { ttl: 2000, wait: 1000 }).catch((e: unknown) => e);
      expect(performance.now() - started).toBeLessThan(1000 + 500); // its wait, plus the last attempt's node timeout
      expect(error).toBeInstanceOf(QuorumError);
      const votes = (error as QuorumError).outcome.votes;
      expect(votes.map((v) => v.vote)).toEqual(['error', 'for', 'error', 'for', 'error']);
      for (const i of [0, 2, 4]) expect((error as Error).message).toContain(`node ${i} (127.0.0.1:${five[i]!.port}): error`);
      for (const i of [0, 2, 4]) five[i]!.resume();
      resumed = true;
      const end = performance.now() + 3000;
      while (!(await noKeyLeft(prefix, 'majority')) && performance.now() < end) await new Promise((r) => setTimeout(r, 20));
      expect(await noKeyLeft(prefix, 'majority')).toBe(true);
    } finally {
      if (!resumed) for (const i of [0, 2, 4]) five[i]!.resume();
    }
  });
});
