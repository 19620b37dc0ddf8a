/**
 * Where renewals are not batched across locks, the manager's one renewal timer extends each lease
 * alone, or in small groups: on a Redis Cluster client one call per slot (a script's keys must
 * share one, and each lock name is its own hash tag, so these four leases are four calls), over
 * Redlock (no extendMany), and for semaphore permits everywhere. The watchdog's semantics hold
 * there too: leases due together each get their own outcome.
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { Lease } from '../../src/index.js';
import { aborted } from '../contract/lock-contract.js';
import { ioredisClusterHarness, redlockHarness, uniquePrefix, type BackendHarness } from '../helpers/harness.js';
import { RedisCluster } from '../helpers/redis-cluster.js';
import { RedisServer } from '../helpers/redis-server.js';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** `semaphores`: whether the backend has them (not Redlock). */
function renewedAlone(label: string, semaphores: boolean, makeHarness: () => Promise<BackendHarness>): void {
  describe(`renewals one lease (or one slot) a call: ${label}`, () => {
    let h: BackendHarness | undefined;
    afterAll(async () => h?.close());

    it('leases due together are renewed across several TTLs, each with its own outcome; a permit too', async () => {
      h = await makeHarness();
      const prefix = uniquePrefix();
      const [a, b] = [h.locks({ prefix }), h.locks({ prefix })];
      const names = ['f1', 'f2', 'f3', 'f4'];
      const leases = await Promise.all(names.map((name) => a.acquire(name, { ttl: 1200, renew: { every: 200 } })));
      const permit: Lease | undefined = !semaphores ? undefined : await a.semaphore('pool', { limit: 1, ttl: 1200 }).acquire({ renew: { every: 200 } });
      await h.forceDelete(prefix, 'f2');
      expect(await aborted(leases[1]!.signal)).toMatchObject({ code: 'LEASE_LOST', reason: 'gone', key: 'f2' });
      // Held across two more TTLs: renewed (time is what is tested here).
      await sleep(2800);
      for (const i of [0, 2, 3]) {
        expect(leases[i]!.held).toBe(true);
        expect(await b.tryAcquire(names[i]!)).toBeNull();
      }
      if (permit) {
        expect(permit.held).toBe(true);
        expect(await b.semaphore('pool', { limit: 1 }).tryAcquire()).toBeNull();
        await permit.release();
      }
      await Promise.all([0, 2, 3].map((i) => leases[i]!.release()));
    });
  });
}

let cluster: RedisCluster | undefined;
let servers: RedisServer[] = [];
afterAll(async () => {
  await cluster?.stop();
  await Promise.all(servers.map((s) => s.stop()));
});

renewedAlone('Redis Cluster (3 masters) through ioredis Cluster', true, async () => ioredisClusterHarness((cluster = await RedisCluster.start({ masters: 3 }))));
renewedAlone('Redlock over 3 servers', false, async () => {
  servers = await Promise.all([0, 1, 2].map(() => RedisServer.start()));
  return redlockHarness(servers);
});
