/**
 * Redis Cluster beyond the contract (which runs on a 3-master cluster through both clients):
 * locks spread over every master, and a failover of one master while leases are held, renewed
 * and waited for.
 */
import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Lease, type Locks } from '../../src/index.js';
import { lockKeys } from '../../src/keys.js';
import { uniquePrefix, managerOver } from '../helpers/harness.js';
import { RedisCluster, type ClusterNode } from '../helpers/redis-cluster.js';

let cluster: RedisCluster;
const cleanup: Array<() => Promise<unknown>> = [];

beforeAll(async () => {
  cluster = await RedisCluster.start({ masters: 3, replicasPerMaster: 1 });
});
afterAll(async () => {
  for (const step of cleanup.reverse()) await step().catch(() => {});
  await cluster?.stop();
});

function manager(settings: { prefix: string; recheck?: number }): Locks {
  const client = new Cluster(cluster.startupNodes);
  return managerOver(cleanup, [client], { ...settings, redis: client });
}

/** Lock names grouped by the master that serves their keys. */
async function namesByMaster(prefix: string, count: number): Promise<Map<ClusterNode, string[]>> {
  const byMaster = new Map<ClusterNode, string[]>();
  for (let i = 0; i < count; i++) {
    const name = `job:${i}`;
    const master = await cluster.masterForKey(lockKeys(prefix, name).lock);
    byMaster.set(master, [...(byMaster.get(master) ?? []), name]);
  }
  return byMaster;
}

describe('Redis Cluster', () => {
  it('spreads locks over every master, each lock in one slot', async () => {
    const prefix = uniquePrefix();
    const byMaster = await namesByMaster(prefix, 60);
    expect(byMaster.size).toBe(3);
    const [a, b] = [manager({ prefix }), manager({ prefix })];
    const names = [...byMaster.values()].flat();
    const leases = await Promise.all(names.map((name) => a.acquire(name, { ttl: 10_000 })));
    const others = await Promise.all(names.map((name) => b.tryAcquire(name)));
    expect(others.every((other) => other === null)).toBe(true);
    await Promise.all(leases.map((lease) => lease.release()));
    const after = await Promise.all(names.map((name) => b.tryAcquire(name)));
    expect(after.every((lease) => lease !== null)).toBe(true);
    for (const lease of after) expect(lease!.fence).toBeGreaterThan(leases[after.indexOf(lease)]!.fence);
    await Promise.all(after.map((lease) => lease!.release()));
  });

  it('a grant message the lock does not back (a waiter heard it on a replica, the release passed it over) only wakes the waiter', async () => {
    const prefix = uniquePrefix();
    const [a, b] = [manager({ prefix }), manager({ prefix, recheck: 60_000 })];
    const holder = await a.acquire('heard', { ttl: 10_000 });
    const waiting = b.acquire('heard', { wait: 10_000 });
    const keys = lockKeys(prefix, 'heard');
    const master = await cluster.masterForKey(keys.lock);
    let member: string | undefined;
    while (!(member = ((await master.call('ZRANGE', keys.queue, '0', '0')) as string[])[0])) await new Promise((r) => setTimeout(r, 2));
    // What the release sends to a waiter it grants the lock to, but the lock is still the holder's.
    const managerId = member.slice(0, member.lastIndexOf(':'));
    expect(await master.call('SPUBLISH', `${keys.lock}:inbox:${managerId}`, `${member} 42`)).toBe(1);
    await holder.release();
    const next = await waiting;
    expect(next.fence).not.toBe(42);
    expect(next.fence).toBeGreaterThan(holder.fence);
    expect(await master.call('GET', keys.lock)).not.toBeNull();
    await next.release();
  });

  it('keeps renewed leases and serves waiters across a failover of one master', async () => {
    const prefix = uniquePrefix();
    const byMaster = await namesByMaster(prefix, 30);
    const [victim, names] = [...byMaster.entries()][0]!;
    const all = [...byMaster.values()].flat();
    const [a, b] = [manager({ prefix }), manager({ prefix, recheck: 60_000 })];
    // Renewed every 200 ms: several renewals fall during and after the failover.
    const leases: Lease[] = await Promise.all(all.map((name) => a.acquire(name, { ttl: 600, renew: true })));
    const waiting = b.acquire(names[0]!, { wait: 20_000 });

    const promoted = await cluster.failover(victim); // CLUSTER FAILOVER on its replica: no write lost
    expect(promoted).not.toBe(victim);
    // Past two TTLs after the failover: only renewals (on the new master, for the victim's keys) keep the leases.
    await new Promise((r) => setTimeout(r, 1300));
    expect(leases.filter((lease) => !lease.held).map((lease) => lease.key)).toEqual([]);
    const stolen = await Promise.all(names.slice(1).map((name) => b.tryAcquire(name)));
    expect(stolen.every((s) => s === null)).toBe(true);

    // The waiter on the failed-over master hears the release (its recheck is 60 s away).
    const released = performance.now();
    await leases[all.indexOf(names[0]!)]!.release();
    const next = await waiting;
    expect(performance.now() - released).toBeLessThan(5000);
    expect(next.fence).toBeGreaterThan(leases[all.indexOf(names[0]!)]!.fence);
    await next.release();
    await Promise.all(leases.map((lease) => lease.release().catch(() => {})));
  });
});
