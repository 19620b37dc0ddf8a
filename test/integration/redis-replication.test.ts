/**
 * A primary with a replica: what a failover does to held leases, with and without replica
 * acknowledgement (`replication`: WAIT pipelined behind each acquire). The failover is done by
 * hand, as Sentinel would: the primary is killed and the replica promoted with REPLICAOF NO ONE.
 */
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createLocks, InvalidOptionError, ReplicationError, type Locks } from '../../src/index.js';
import { lockKeys } from '../../src/keys.js';
import { rawClient, uniquePrefix, managerOver, replicatedHarness } from '../helpers/harness.js';
import { RedisServer } from '../helpers/redis-server.js';
import { giveUpContract } from '../contract/give-up-contract.js';

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const step of cleanup.reverse()) await step().catch(() => {});
  cleanup.length = 0;
});

/** Polls until `check` holds: replication links come up with no event a client can wait for. */
async function until(check: () => Promise<boolean>, what: string, ms = 10_000): Promise<void> {
  const end = performance.now() + ms;
  while (!(await check())) {
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function startPair(): Promise<{ primary: RedisServer; replica: RedisServer; primaryRaw: Redis; replicaRaw: Redis }> {
  // No 5 s wait for more replicas before a full sync.
  const primary = await RedisServer.start({ args: ['--repl-diskless-sync-delay', '0'] });
  const replica = await RedisServer.start({ args: ['--replicaof', '127.0.0.1', String(primary.port)] });
  cleanup.push(() => primary.stop(), () => replica.stop());
  const primaryRaw = rawClient(primary);
  const replicaRaw = rawClient(replica);
  for (const raw of [primaryRaw, replicaRaw]) raw.on('error', () => {});
  cleanup.push(async () => primaryRaw.disconnect(), async () => replicaRaw.disconnect());
  await until(async () => /master_link_status:up/.test(await replicaRaw.info('replication')), 'the replica to sync');
  return { primary, replica, primaryRaw, replicaRaw };
}

function managerOn(server: RedisServer, settings: Parameters<typeof createLocks>[0] = {}): Locks {
  const client = new Redis(server.port, '127.0.0.1', { maxRetriesPerRequest: 0, retryStrategy: () => null });
  return managerOver(cleanup, [client], { ...settings, redis: client });
}

/**
 * A failover that loses the writes in flight, as after a partition: the replica is cut off and
 * promoted (REPLICAOF NO ONE, what Sentinel does), then the old primary keeps taking writes a
 * little longer before it dies. (Pausing the replica would not do: the writes would wait in its
 * socket buffer and be applied when it resumes.)
 */
async function promoteReplica(pair: Awaited<ReturnType<typeof startPair>>): Promise<void> {
  await pair.replicaRaw.replicaof('NO', 'ONE');
}

/** Waits until the replica has the key: it has replicated. */
async function replicated(pair: Awaited<ReturnType<typeof startPair>>, key: string): Promise<void> {
  await until(async () => (await pair.replicaRaw.exists(key)) === 1, `${key} to reach the replica`);
}

describe('replica acknowledgement', () => {
  it('hands out a lease once the replica has the key', async () => {
    const pair = await startPair();
    const prefix = uniquePrefix();
    // A generous timeout: the test files run in parallel on a busy machine.
    const locks = managerOn(pair.primary, { prefix, replication: { replicas: 1, timeout: 2000 } });
    const lease = await locks.acquire('acked', { ttl: 10_000 });
    expect(lease.replicated).toBe(true);
    // Acknowledged means the replica has it now, not eventually.
    expect(await pair.replicaRaw.get(lockKeys(prefix, 'acked').lock)).toBe(lease.token);
    await lease.release();
  });

  it("refuses a lease the replica did not acknowledge (shortfall 'fail'), or marks it (shortfall 'accept')", async () => {
    const pair = await startPair();
    const prefix = uniquePrefix();
    const strict = managerOn(pair.primary, { prefix, replication: { replicas: 1, timeout: 100 } });
    const lenient = managerOn(pair.primary, { prefix, replication: { replicas: 1, timeout: 100, shortfall: 'accept' } });
    pair.replica.pause();
    try {
      const error = await strict.acquire('lagging').catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ReplicationError);
      expect(error).toMatchObject({ code: 'NOT_REPLICATED', requested: 1, acknowledged: 0, key: 'lagging' });
      expect(await pair.primaryRaw.exists(lockKeys(prefix, 'lagging').lock)).toBe(0); // released again
      const marked = await lenient.acquire('lagging');
      expect(marked.replicated).toBe(false);
      await marked.release();
    } finally {
      pair.replica.resume();
    }
  });

  it('without it, a failover to a replica that missed the lock lets a second holder in (fencing still tells them apart)', async () => {
    const pair = await startPair();
    const prefix = uniquePrefix();
    const old = managerOn(pair.primary, { prefix });
    const first = await old.acquire('failover', { ttl: 30_000 });
    expect(first.replicated).toBeUndefined();
    await replicated(pair, lockKeys(prefix, 'failover').lock);
    await promoteReplica(pair);
    const lagging = await old.acquire('lagging', { ttl: 30_000 }); // only the old primary has it
    await pair.primary.kill();
    const second = await managerOn(pair.replica, { prefix }).tryAcquire('lagging', { ttl: 30_000 });
    // Two leases on one lock, both valid on their holders' clocks: the single-Redis limit docs/safety.md states.
    expect(second).not.toBeNull();
    expect(lagging.held).toBe(true);
    expect(second!.fence).toBeGreaterThan(lagging.fence); // the new primary's fence counts from its clock
    // The lock that had replicated survives the failover.
    expect(await managerOn(pair.replica, { prefix }).tryAcquire('failover')).toBeNull();
  });

  it('with it, every lease handed out survives the failover, and the one the replica missed was never handed out', async () => {
    const pair = await startPair();
    const prefix = uniquePrefix();
    const locks = managerOn(pair.primary, { prefix, replication: { replicas: 1, timeout: 1000 } });
    const held = await locks.acquire('kept', { ttl: 30_000 });
    await promoteReplica(pair);
    await expect(locks.acquire('missed', { ttl: 30_000 })).rejects.toBeInstanceOf(ReplicationError);
    await pair.primary.kill();
    const promoted = managerOn(pair.replica, { prefix });
    expect(await promoted.tryAcquire('kept')).toBeNull(); // still held by `held`
    expect(held.replicated).toBe(true);
    const missed = await promoted.tryAcquire('missed');
    expect(missed).not.toBeNull(); // nobody was told they held it
  });

  it("an extend the replica did not acknowledge rejects (NOT_REPLICATED) and leaves the lease's validity as it was; with shortfall 'accept' it extends", async () => {
    const pair = await startPair();
    const prefix = uniquePrefix();
    // Generous: the acquires must be acknowledged on a busy machine; the extends then wait it out.
    const strict = managerOn(pair.primary, { prefix, replication: { replicas: 1, timeout: 1000 } });
    const lenient = managerOn(pair.primary, { prefix, replication: { replicas: 1, timeout: 1000, shortfall: 'accept' } });
    const lease = await strict.acquire('renewed', { ttl: 10_000 });
    const other = await lenient.acquire('renewed-too', { ttl: 10_000 });
    const [before, otherBefore] = [lease.validUntil, other.validUntil];
    pair.replica.pause();
    try {
      const error = await lease.extend(20_000).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ReplicationError);
      expect(error).toMatchObject({ code: 'NOT_REPLICATED', operation: 'extend', acknowledged: 0, key: 'renewed' });
      expect(lease.validUntil).toBe(before);
      expect(lease.held).toBe(true);
      await other.extend(20_000);
      expect(other.validUntil).toBeGreaterThan(otherBefore);
    } finally {
      pair.replica.resume();
    }
    await lease.release();
    await other.release();
  });

  it('refuses the option where it does not apply, and bad values', () => {
    expect(() => createLocks({ replication: { replicas: 1 } })).toThrow(/only with "redis" or "url"/);
    const client = new Redis({ lazyConnect: true });
    try {
      expect(() => createLocks({ redis: client, replication: { replicas: 0 } })).toThrow(InvalidOptionError);
      expect(() => createLocks({ redis: client, replication: { replicas: 1, shortfall: 'maybe' as 'fail' } })).toThrow(
        /replication.shortfall/,
      );
      expect(() => createLocks({ redis: client, replication: { replicas: 1, timeout: -1 } })).toThrow(/replication.timeout/);
    } finally {
      client.disconnect();
    }
  });
});

describe('give-up contract: replica acknowledgement (wake mode on one Redis)', () => {
  // Its own pair for the whole contract: the tests above add theirs to `cleanup`, which runs after each test.
  const servers: RedisServer[] = [];
  afterAll(async () => Promise.all(servers.map((s) => s.stop())));
  giveUpContract(
    async () => {
      const primary = await RedisServer.start({ args: ['--repl-diskless-sync-delay', '0'] });
      servers.push(primary);
      const replica = await RedisServer.start({ args: ['--replicaof', '127.0.0.1', String(primary.port)] });
      servers.push(replica);
      const replicaRaw = rawClient(replica);
      replicaRaw.on('error', () => {});
      try {
        await until(async () => /master_link_status:up/.test(await replicaRaw.info('replication')), 'the replica to sync');
      } finally {
        replicaRaw.disconnect();
      }
      return replicatedHarness(primary, 1);
    },
    // A release frees the lock and wakes the next waiter, whose own acquire (and WAIT) takes it.
    { semaphores: true, stalls: true },
  );
});
