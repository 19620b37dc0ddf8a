/**
 * Redis Cluster beyond the contract (which runs on a 3-master cluster through both clients):
 * locks spread over every master, and a failover of one master while leases are held, renewed
 * and waited for.
 */
import slotOf from 'cluster-key-slot';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCluster } from 'redis';
import { createLocks, LeaseLostError, type EvictionPolicyEvent, type Lease, type Locks, type RenewedEvent } from '../../src/index.js';
import { lockKeys } from '../../src/keys.js';
import { acquireScript, extendManyScript, extendScript, keepQueuedScript } from '../../src/lua/scripts.generated.js';
import { uniquePrefix, managerOver } from '../helpers/harness.js';
import { renewalCounts } from '../helpers/renewal-counts.js';
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

function manager(settings: { prefix: string; recheck?: number; hooks?: { renewed?: (event: RenewedEvent) => void } }): Locks {
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

/** `count` lock names of `prefix` whose keys fall in one slot (each name is its key's hash tag: found by trying). */
function inOneSlot(prefix: string, count: number): string[] {
  const bySlot = new Map<number, string[]>();
  for (let i = 0; ; i++) {
    const name = `n${i}`;
    const slot = slotOf(lockKeys(prefix, name).lock);
    const same = [...(bySlot.get(slot) ?? []), name];
    bySlot.set(slot, same);
    if (same.length === count) return same;
  }
}

/** The scripts a master runs from now on, as `<name>/<number of keys>` (MONITOR on a connection of the test's own). */
async function scriptsRunOn(master: ClusterNode): Promise<string[]> {
  const names = new Map([
    [extendManyScript.sha, 'extendMany'],
    [extendScript.sha, 'extend'],
    [keepQueuedScript.sha, 'keep'],
    [acquireScript.sha, 'acquire'],
  ]);
  const monitor = new Redis(master.port, '127.0.0.1');
  cleanup.push(async () => monitor.disconnect());
  const calls: string[] = [];
  (await monitor.monitor()).on('monitor', (_time: string, args: string[]) => {
    if (args[0]?.toLowerCase() === 'evalsha') calls.push(`${names.get(args[1]!) ?? 'other'}/${args[2]}`);
  });
  return calls;
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

  it('renews the leases whose locks share a slot in one call per round; a lease whose key is gone among them is lost alone', async () => {
    const prefix = uniquePrefix();
    const names = inOneSlot(prefix, 4);
    const master = await cluster.masterForKey(lockKeys(prefix, names[0]!).lock);
    const calls = await scriptsRunOn(master);
    let renewed = 0;
    const a = manager({ prefix, hooks: { renewed: () => renewed++ } });
    const leases = await Promise.all(names.map((name) => a.acquire(name, { ttl: 3000, renew: { every: 100 } })));
    await expect.poll(() => calls.filter((c) => c === 'extendMany/4').length, { timeout: 5000, interval: 20 }).toBeGreaterThanOrEqual(3);
    expect(calls.filter((c) => c.startsWith('extend/'))).toEqual([]);
    // One key deleted between two rounds: that lease alone is lost, the other three stay held and renewed.
    await master.call('DEL', lockKeys(prefix, names[0]!).lock);
    await expect.poll(() => leases[0]!.state, { timeout: 5000, interval: 10 }).toBe('lost');
    expect(leases[0]!.lostError).toMatchObject({ reason: 'gone' });
    const before = renewed;
    await expect.poll(() => renewed, { timeout: 5000, interval: 20 }).toBeGreaterThanOrEqual(before + 3 * 2);
    expect(calls.at(-1)).toBe('extendMany/3');
    for (const lease of leases.slice(1)) expect(lease.state).toBe('held');
    await Promise.all(leases.slice(1).map((lease) => lease.release()));
  });

  it('a master that holds its writes past the TTL loses its own renewed leases only: the other masters\' leases stay held and renewed', async () => {
    const prefix = uniquePrefix();
    const byMaster = await namesByMaster(prefix, 30);
    const [victim, names] = [...byMaster.entries()][0]!;
    const all = [...byMaster.values()].flat();
    const renewals = renewalCounts();
    const a = manager({ prefix, hooks: { renewed: renewals.renewed } });
    // One renewal batch for all of them (acquired together, one TTL), one call per slot.
    const leases = await Promise.all(all.map((name) => a.acquire(name, { ttl: 600, renew: true })));
    const onVictim = leases.filter((lease) => names.includes(lease.key));
    const others = leases.filter((lease) => !names.includes(lease.key));
    // Writes (the renewals' scripts) held on one master for 1.5 s, its cluster bus untouched: no failover.
    await victim.call('CLIENT', 'PAUSE', '1500', 'WRITE');
    await expect.poll(() => onVictim.filter((lease) => lease.state !== 'lost').length, { timeout: 5000, interval: 10 }).toBe(0);
    expect(others.filter((lease) => lease.state !== 'held').map((lease) => lease.key)).toEqual([]);
    // The pause's end, awaited: the paused master answers a PUBLISH (a write) once it is over.
    await victim.callWithin(5000, 'PUBLISH', `${prefix}pause-probe`, '');
    // Then two TTLs' worth of renewals more (three a TTL) for each of the others: still held, renewed all along.
    await renewals.more(others, 6, 10_000);
    expect(others.filter((lease) => lease.state !== 'held').map((lease) => lease.key)).toEqual([]);
    await Promise.all(others.map((lease) => lease.release()));
  });

  it('keeps waiters on locks that share a slot queued with one call per recheck, and no attempt of their own; the releases grant them the locks', async () => {
    const prefix = uniquePrefix();
    const names = inOneSlot(prefix, 3);
    const master = await cluster.masterForKey(lockKeys(prefix, names[0]!).lock);
    const [a, b] = [manager({ prefix }), manager({ prefix, recheck: 200 })];
    const leases = await Promise.all(names.map((name) => a.acquire(name, { ttl: 30_000 })));
    const waits = names.map((name) => b.acquire(name, { wait: 20_000 }));
    for (const name of names) {
      await expect.poll(() => master.call('ZCARD', lockKeys(prefix, name).queue), { timeout: 5000, interval: 20 }).toBe(1);
    }
    const calls = await scriptsRunOn(master);
    await expect.poll(() => calls.filter((c) => c === `keep/${3 * 3}`).length, { timeout: 5000, interval: 20 }).toBeGreaterThanOrEqual(3);
    expect(calls.filter((c) => c.startsWith('acquire/'))).toEqual([]);
    expect(calls.filter((c) => c.startsWith('keep/') && c !== `keep/${3 * 3}`)).toEqual([]);
    await Promise.all(leases.map((lease) => lease.release()));
    const won = await Promise.all(waits);
    for (const [i, lease] of won.entries()) expect(lease.fence).toBeGreaterThan(leases[i]!.fence);
    await Promise.all(won.map((lease) => lease.release()));
  });

  it('keeps renewed leases and serves waiters across a failover of one master', async () => {
    const prefix = uniquePrefix();
    const byMaster = await namesByMaster(prefix, 30);
    const [victim, names] = [...byMaster.entries()][0]!;
    const all = [...byMaster.values()].flat();
    const renewals = renewalCounts();
    const [a, b] = [manager({ prefix, hooks: { renewed: renewals.renewed } }), manager({ prefix, recheck: 60_000 })];
    // Renewed every 667 ms: several renewals fall during and after the failover. A graceful
    // failover holds the victim's writes until the replica took over: under CI's load that took
    // longer than a 600 ms TTL once (every lease lost), so the TTL leaves it 2 s.
    const leases: Lease[] = await Promise.all(all.map((name) => a.acquire(name, { ttl: 2000, renew: true })));
    const waiting = b.acquire(names[0]!, { wait: 20_000 });

    const promoted = await cluster.failover(victim); // CLUSTER FAILOVER on its replica: no write lost
    expect(promoted).not.toBe(victim);
    // Two TTLs' worth of renewals (three a TTL) of every lease after the failover: only renewals (on
    // the new master, for the victim's keys) keep the leases.
    await renewals.more(leases, 6, 15_000);
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

describe('a forced release on a cluster', () => {
  it('is reported to the holder as forced at its next extend, as on one Redis (the note shares the lock\'s slot)', async () => {
    const prefix = uniquePrefix();
    const [holder, operator] = [manager({ prefix }), manager({ prefix })];
    const lease = await holder.acquire('stuck', { ttl: 60_000 });
    expect(await operator.forceRelease('stuck')).toMatchObject({ held: true });
    const lost = await lease.extend().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(lost).toBeInstanceOf(LeaseLostError);
    expect((lost as LeaseLostError).reason).toBe('forced');
  });
});

describe('client options on a cluster', () => {
  it('ioredis keyPrefix: a waiter hears its grant on its sharded inbox, and list() finds the lock', async () => {
    const prefix = uniquePrefix();
    const clientOf = (): Cluster => new Cluster(cluster.startupNodes, { keyPrefix: 'app:' });
    const [ca, cb] = [clientOf(), clientOf()];
    const a = managerOver(cleanup, [ca], { prefix, redis: ca });
    const b = managerOver(cleanup, [cb], { prefix, redis: cb, recheck: 60_000 });
    const holder = await a.acquire('prefixed', { ttl: 30_000 });
    expect((await a.list()).map((info) => info.name)).toEqual(['prefixed']);
    // The holder's recheck and TTL are far: only the release's SPUBLISH can hand the lock over in time.
    const waiting = b.acquire('prefixed', { wait: 5_000 });
    const keys = lockKeys(prefix, 'prefixed');
    const master = await cluster.masterForKey(keys.lock);
    while (Number(await master.call('ZCARD', `app:${keys.queue}`)) === 0) await new Promise((r) => setTimeout(r, 2));
    await holder.release();
    const next = await waiting;
    expect(next.fence).toBeGreaterThan(holder.fence);
    expect(await master.call('EXISTS', `app:${keys.lock}`)).toBe(1); // the keys carry the client's prefix
    await next.release();
  });

  it('node-redis: the eviction-policy check reaches a node and warns of a policy that evicts lock keys', async () => {
    const masters = cluster.masters;
    await Promise.all(masters.map((m) => m.call('CONFIG', 'SET', 'maxmemory-policy', 'allkeys-lru')));
    try {
      const client = createCluster({ rootNodes: cluster.rootNodes });
      client.on('error', () => {});
      await client.connect();
      let heard!: (event: EvictionPolicyEvent) => void;
      const event = new Promise<EvictionPolicyEvent>((resolve) => (heard = resolve));
      const locks = createLocks({ prefix: uniquePrefix(), redis: client, hooks: { evictionPolicy: heard } });
      cleanup.push(async () => {
        await locks.close();
        await client.close();
      });
      expect(await event).toMatchObject({ policy: 'allkeys-lru' });
    } finally {
      await Promise.all(masters.map((m) => m.call('CONFIG', 'SET', 'maxmemory-policy', 'noeviction')));
    }
  });
});
