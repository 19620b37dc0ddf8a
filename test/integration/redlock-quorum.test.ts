/**
 * Redlock over three independent redis-server processes, every node up: a lease taken, extended
 * and released by a majority, quorum outcomes as data, one script per node in the steady state, a
 * waiter woken by a release; and Redlock's options. Nodes that die, freeze and come back are in
 * redlock-node-failures.test.ts, five nodes in redlock-five-nodes.test.ts.
 */
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { createLocks, InvalidOptionError, LeaseLostError, LockTimeoutError, QuorumError, UnsupportedError } from '../../src/index.js';
import { lockKeys } from '../../src/keys.js';
import { raiseFenceScript } from '../../src/lua/scripts.generated.js';
import { FaultProxy } from '../faults/proxy.js';
import { managerOver, uniquePrefix } from '../helpers/fixtures.js';
import { eventually, useRedlockNodes } from '../helpers/redlock-nodes.js';
import { aborted } from '../contract/lock-contract.js';

const { servers, raws, cleanup, redlock } = useRedlockNodes(3);

const fenceOn = async (raw: Redis, prefix: string, name: string): Promise<number> =>
  Number((await raw.get(lockKeys(prefix, name).fence)) ?? 0);

describe('Redlock', () => {
  it('takes a lease on every node and releases it from every node', async () => {
    const prefix = uniquePrefix();
    const locks = redlock({ prefix });
    expect(locks.backend).toBe('redlock (3 nodes)');
    const lease = await locks.acquire('all', { ttl: 5000 });
    const key = lockKeys(prefix, 'all').lock;
    // Handed out once a majority voted for it (the third node's reply may still be on its way).
    const holders = async (): Promise<number> => (await Promise.all(raws.map((r) => r.get(key)))).filter((t) => t === lease.token).length;
    expect(await holders()).toBeGreaterThanOrEqual(2);
    expect(await eventually(async () => (await holders()) === 3)).toBe(true);
    // The lease's fence is the highest of the voters', and a majority of counters is at least that.
    const fences = await Promise.all(raws.map((r) => fenceOn(r, prefix, 'all')));
    expect(fences.filter((f) => f >= lease.fence).length).toBeGreaterThanOrEqual(2);
    await lease.release();
    expect(await eventually(async () => (await Promise.all(raws.map((r) => r.exists(key)))).every((n) => n === 0))).toBe(true);
  });

  it('in the steady state an acquire is one script per node: the voters issue the same fence and none needs raising', async () => {
    const prefix = uniquePrefix();
    // A node timeout far above a loaded machine's delays: a node marked hung would add retries.
    const locks = redlock({ prefix, nodeTimeout: 2000 });
    // The first acquire finds no counters; from then on the counters agree.
    await (await locks.acquire('steady', { ttl: 5000 })).release();
    const keyOf = lockKeys(prefix, 'steady');
    // A lease is handed out and released on a majority: the third node's acquire and release may
    // still be on their way. Both ran on a node once its counter is at `fence` (the acquire wrote
    // it) and the lock key is gone (the release, sent after it on the same connection, ran too).
    // A lock key that is gone alone does not say it: the acquire may not have run yet.
    const ranEverywhere = (fence: number): Promise<boolean> =>
      eventually(async () =>
        (
          await Promise.all(raws.map(async (r) => (await fenceOn(r, prefix, 'steady')) >= fence && (await r.exists(keyOf.lock)) === 0))
        ).every(Boolean),
      );
    const scriptCalls = async (): Promise<number> => {
      let sum = 0;
      for (const raw of raws) {
        const stats = await raw.info('commandstats');
        for (const m of stats.matchAll(/cmdstat_(?:evalsha|eval):calls=(\d+)/g)) sum += Number(m[1]);
      }
      return sum;
    };
    // Wait for the stragglers' copies of the first acquire and release before counting.
    expect(await ranEverywhere(1)).toBe(true);
    const before = await scriptCalls();
    const rounds = 5;
    let last = 0;
    for (let i = 0; i < rounds; i++) {
      const lease = await locks.acquire('steady', { ttl: 5000 });
      expect(lease.fence).toBeGreaterThan(last);
      last = lease.fence;
      const fences = await Promise.all(raws.map((r) => fenceOn(r, prefix, 'steady')));
      expect(fences.filter((f) => f === lease.fence).length).toBeGreaterThanOrEqual(2);
      await lease.release();
      expect(await ranEverywhere(lease.fence)).toBe(true);
    }
    // An acquire and a release per node per round, and no raise-fence script. (This test's own
    // probes are EXISTS, GET and INFO, not scripts.)
    expect((await scriptCalls()) - before).toBe(rounds * 2 * raws.length);
  });

  it('wins with a majority while a minority is held by another owner, and not without one', async () => {
    const prefix = uniquePrefix();
    const locks = redlock({ prefix });
    const key = lockKeys(prefix, 'minority').lock;
    await raws[0]!.set(key, 'someone-else', 'PX', 60_000);
    const lease = await locks.acquire('minority', { ttl: 5000 });
    await lease.release();
    expect(await raws[0]!.get(key)).toBe('someone-else'); // never touches another owner's key

    await raws[1]!.set(key, 'someone-else', 'PX', 60_000);
    expect(await locks.tryAcquire('minority')).toBeNull();
    const timedOut = await locks.acquire('minority', { wait: 50 }).catch((e: unknown) => e);
    expect(timedOut).toBeInstanceOf(LockTimeoutError);
    const outcome = (timedOut as LockTimeoutError).outcome!;
    expect(outcome).toMatchObject({ operation: 'acquire', quorum: 2, for: 1, against: 2, errors: 0 });
    expect(outcome.votes.map((v) => v.vote)).toEqual(['against', 'against', 'for']);
    expect((timedOut as Error).message).toMatch(/1 of 3 nodes voted for, 2 needed/);
    // The node it did win was given back (the release is sent, not waited for).
    expect(await eventually(async () => (await raws[2]!.exists(key)) === 0)).toBe(true);
  });

  it('a majority that voted for but whose fence could not be raised is undecided (a QuorumError naming the node), not a lock held', async () => {
    const prefix = uniquePrefix();
    const proxy = await FaultProxy.start(servers[0]!.port);
    try {
      const options = { maxRetriesPerRequest: 0, retryStrategy: () => 50, autoResendUnfulfilledCommands: false };
      const clients = [proxy.port, servers[1]!.port, servers[2]!.port].map((port) => new Redis(port, '127.0.0.1', options));
      const locks = managerOver(cleanup, clients, { prefix, redlock: clients });
      const keys = lockKeys(prefix, 'raise');
      // Node 1 issues a fence far above node 0's clock (node 0 has no counter: it issues its
      // clock), so node 0 must be raised to it; node 2 is held by another owner.
      await raws[1]!.set(keys.fence, String(Date.now() * 1000 + 1e12));
      await raws[2]!.set(keys.lock, 'someone-else', 'PX', 10_000);
      const reset = proxy.resetOn(raiseFenceScript.sha, { forward: false }); // the raise never runs on node 0
      const error: unknown = await locks.tryAcquire('raise').then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(await reset).toBe(true);
      expect(error).toBeInstanceOf(QuorumError);
      expect((error as QuorumError).outcome.votes.map((v) => v.vote)).toEqual(['error', 'for', 'against']);
      // Nothing of it is left where it voted for.
      expect(await eventually(async () => (await raws[0]!.exists(keys.lock)) + (await raws[1]!.exists(keys.lock)) === 0)).toBe(true);
    } finally {
      await proxy.stop();
    }
  });

  it('extend needs a majority: a lease deleted on two nodes is lost, and the third copy is given back', async () => {
    const prefix = uniquePrefix();
    const locks = redlock({ prefix });
    const lease = await locks.acquire('extend', { ttl: 5000 });
    const key = lockKeys(prefix, 'extend').lock;
    // Handed out on a majority; wait for the third node's copy, so that deleting below is what decides.
    const copies = async (): Promise<number> => (await Promise.all(raws.map((r) => r.get(key)))).filter((t) => t === lease.token).length;
    expect(await eventually(async () => (await copies()) === 3)).toBe(true);
    await raws[0]!.del(key);
    await lease.extend(5000); // two of three still hold it
    await raws[1]!.del(key);
    await expect(lease.extend(5000)).rejects.toBeInstanceOf(LeaseLostError);
    expect(await aborted(lease.signal)).toBeInstanceOf(LeaseLostError);
    expect(await eventually(async () => (await raws[2]!.exists(key)) === 0)).toBe(true);
  });

  it('a waiter wakes when the release reaches the nodes, not at its recheck or the TTL', async () => {
    const prefix = uniquePrefix();
    const [a, b] = [redlock({ prefix }), redlock({ prefix, recheck: 60_000 })];
    const holder = await a.acquire('wake', { ttl: 60_000 });
    const waiting = b.acquire('wake', { wait: 10_000 });
    await new Promise((r) => setTimeout(r, 50)); // let it queue on the nodes
    const released = performance.now();
    await holder.release();
    const lease = await waiting;
    expect(performance.now() - released).toBeLessThan(1000);
    expect(lease.fence).toBeGreaterThan(holder.fence);
    await lease.release();
  });

  it('refuses fenced writes (a fenced resource lives on one Redis)', async () => {
    const locks = redlock({ prefix: uniquePrefix() });
    await expect(locks.fencedWrite('resource', 'x', 1)).rejects.toBeInstanceOf(UnsupportedError);
  });
});

describe('Redlock options', () => {
  it('refuses an empty node list, a node given twice, and nodeTimeout without redlock', () => {
    expect(() => createLocks({ redlock: [] })).toThrow(InvalidOptionError);
    const client = new Redis({ lazyConnect: true });
    try {
      expect(() => createLocks({ redlock: [client, client] })).toThrow(/would vote twice/);
      expect(() => createLocks({ redlock: ['redis://127.0.0.1:1', 'redis://127.0.0.1:1/'] })).toThrow(/would vote twice/);
      expect(() => createLocks({ redlock: ['http://x'] })).toThrow(/redlock\[0\]/);
      expect(() => createLocks({ nodeTimeout: 50 })).toThrow(/only with "redlock"/);
      expect(() => createLocks({ redlock: [client], redis: client })).toThrow(/exactly one of "redis", "url", "redlock" or "memory"/);
    } finally {
      client.disconnect();
    }
  });
});
