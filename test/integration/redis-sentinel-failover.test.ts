/**
 * Sentinel failovers with a waiter queued before them, through ioredis 6 and ioredis 5.
 *
 * The question, after the Redis Cluster bug (see openLockInbox in src/backend/inbox.ts): can a
 * waiter's inbox subscription stay on the old primary once it is a replica? A release on the new
 * primary would then PUBLISH a grant that counts 0 receivers (PUBLISH counts the subscribers of
 * the node that runs it) and pass the waiter over, while the waiter still hears the grant, which
 * replication carries to the replica, and takes a lease Redis does not have.
 *
 * Not with Sentinel. It demotes an instance in one transaction (MULTI, REPLICAOF, CONFIG REWRITE,
 * CLIENT KILL TYPE normal, CLIENT KILL TYPE pubsub, EXEC): the instance turns replica and drops its
 * subscribers at once, and they reconnect through Sentinel, which names the new primary. Until
 * then the clients stay on the old primary: ioredis (without `failoverDetector`) learns of a
 * failover only when its connection drops, and Sentinel demotes a primary that is up (SENTINEL
 * FAILOVER, or a paused primary that came back) about 10 s after it promoted a replica. In that
 * window the old primary is still a primary: a grant published on the new one does not reach it,
 * and whatever is written on it (a release, a grant, a lease) is lost when it is demoted.
 */
import { Redis as Redis6 } from 'ioredis';
import { Redis as Redis5 } from 'ioredis5';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LeaseLostError, ReplicationError, type Lease, type Locks, type IoredisClientLike, type LocksOptions } from '../../src/index.js';
import { lockKeys } from '../../src/keys.js';
import { managerOver, uniquePrefix } from '../helpers/harness.js';
import { GROUP, SentinelGroup, until } from '../helpers/redis-sentinel.js';

/** What the test needs of an ioredis 5 or 6 client made with `sentinels`. */
interface SentinelClient extends IoredisClientLike {
  on(event: 'error', listener: () => void): unknown;
  once(event: 'ready', listener: () => void): unknown;
  disconnect(reconnect?: boolean): void;
}

const CELLS = [
  { label: 'ioredis 6', make: (options: object): SentinelClient => new Redis6(options) },
  { label: 'ioredis 5', make: (options: object): SentinelClient => new Redis5(options) },
] as const;

let group: SentinelGroup;
const cleanup: Array<() => Promise<unknown>> = [];
/** One raw connection per server (port), for looking at it; a paused server's commands time out. */
const raws = new Map<number, Redis6>();

beforeAll(async () => {
  // 1 s before a silent primary is failed over: with less, the new primary itself was sometimes
  // taken for down while Sentinel reconfigured it (its links are killed too), and failed over again.
  group = await SentinelGroup.start({ downAfter: 1000 });
  for (const server of group.servers) {
    const raw = new Redis6(server.port, '127.0.0.1', { commandTimeout: 1000, maxRetriesPerRequest: 1 });
    raw.on('error', () => {});
    raws.set(server.port, raw);
  }
});

afterAll(async () => {
  for (const step of cleanup.reverse()) await step().catch(() => {});
  for (const raw of raws.values()) raw.disconnect();
  await group?.stop();
});

function raw(port: number): Redis6 {
  return raws.get(port)!;
}

/** A manager on its own client through Sentinel; the client is returned to move it by hand. */
function viaSentinel(cell: (typeof CELLS)[number], settings: Omit<LocksOptions, 'redis'>): { locks: Locks; client: SentinelClient } {
  const client = cell.make({ sentinels: [{ host: '127.0.0.1', port: group.sentinelPort }], name: GROUP, maxRetriesPerRequest: 50 });
  return { locks: managerOver(cleanup, [client], { ...settings, redis: client }), client };
}

/** A lock with a holder and a waiter queued behind it on the current primary, subscribed there. */
interface Queued {
  readonly label: string;
  readonly prefix: string;
  readonly name: string;
  readonly holder: Lease;
  readonly holderClient: SentinelClient;
  readonly waiting: Promise<Lease>;
  /** When the waiter got its lease (performance.now()), or undefined while it waits. */
  readonly settledAt: () => number | undefined;
  /** The waiter's manager's inbox channel. */
  readonly channel: string;
  readonly other: Locks;
}

async function queue(cell: (typeof CELLS)[number], name: string, primary: number, settings: Omit<LocksOptions, 'redis'> = {}): Promise<Queued> {
  const prefix = uniquePrefix();
  const a = viaSentinel(cell, { prefix, ...settings });
  // A long recheck: the waiter learns of the release from its inbox only.
  const b = viaSentinel(cell, { prefix, recheck: 60_000, ...settings });
  const holder = await a.locks.acquire(name, { ttl: 30_000 });
  let settled: number | undefined;
  const waiting = b.locks.acquire(name, { wait: 40_000, ttl: 30_000 });
  waiting.then(
    () => (settled = performance.now()),
    () => (settled = performance.now()),
  );
  const keys = lockKeys(prefix, name);
  let member: string | undefined;
  await until(async () => (member = ((await raw(primary).call('ZRANGE', keys.queue, '0', '0')) as string[])[0]) !== undefined, 'the waiter to queue');
  const channel = `${prefix}inbox:${member!.slice(0, member!.lastIndexOf(':'))}`;
  await until(async () => (await subscribers(primary, channel)) === 1, 'the waiter to subscribe');
  return { label: cell.label, prefix, name, holder, holderClient: a.client, waiting, settledAt: () => settled, channel, other: viaSentinel(cell, { prefix }).locks };
}

/** Both replicas have everything the primary has (locks, queue entries): a failover loses none of it. */
async function replicated(primary: number): Promise<void> {
  await until(async () => Number(await raw(primary).call('WAIT', '2', '500')) === 2, 'both replicas to acknowledge');
}

async function subscribers(port: number, channel: string): Promise<number> {
  return Number(((await raw(port).call('PUBSUB', 'NUMSUB', channel)) as [string, number])[1]);
}

/**
 * Until `done`: each replica's subscribers to `channels`, read with its role in one transaction.
 * Returns what it found subscribed on a replica ("port channel").
 */
async function watchReplicas(channels: readonly string[], done: () => boolean): Promise<string[]> {
  const found = new Set<string>();
  for (let last = false; !last; ) {
    last = done();
    for (const [port, r] of raws) {
      const reply = await r
        .multi()
        .call('ROLE')
        .call('PUBSUB', 'NUMSUB', ...channels)
        .exec()
        .catch(() => null); // a paused server
      if (!reply) continue;
      const [[, role], [, counts]] = reply as [[unknown, unknown[]], [unknown, (string | number)[]]];
      if (role[0] !== 'slave') continue;
      for (let i = 0; i < channels.length; i++) if (Number(counts[2 * i + 1]) > 0) found.add(`${port} ${channels[i]}`);
    }
    await new Promise((r) => setTimeout(r, 20)); // sampling: a subscription on a replica announces nothing
  }
  return [...found];
}

/** The waiter's lease is the lock on the new primary: its fence is the counter's, nobody else gets in, and it extends. */
async function expectExclusive(entry: Queued, lease: Lease, primary: number): Promise<void> {
  const keys = lockKeys(entry.prefix, entry.name);
  expect(Number(await raw(primary).get(keys.fence)), entry.label).toBe(lease.fence);
  expect(await entry.other.tryAcquire(entry.name), entry.label).toBeNull();
  await lease.extend();
  await lease.release();
  const next = await entry.other.tryAcquire(entry.name);
  expect(next!.fence).toBeGreaterThan(lease.fence);
  await next!.release();
}

describe('Sentinel failover with a waiter queued before it', () => {
  it.each(['SENTINEL FAILOVER', 'a paused primary'] as const)(
    '%s: the waiter is never subscribed on a replica; a grant the new primary publishes while the old one is not yet demoted is not heard there; once demoted, a release grants the lock at once; each lease is the lock on the new primary',
    async (how) => {
      const old = await group.masterPort();
      // Per client: a holder that releases on the new primary before the old one is demoted
      // ('during'), and one that releases after ('after').
      const during = await Promise.all(CELLS.map((cell) => queue(cell, 'during', old)));
      const after = await Promise.all(CELLS.map((cell) => queue(cell, 'after', old)));
      const all = [...during, ...after];
      await replicated(old);

      const since = group.mark();
      if (how === 'SENTINEL FAILOVER') {
        await group.failover();
      } else {
        group.server(old).pause();
        await group.logged(since, '+switch-master');
        group.server(old).resume();
      }
      await group.logged(since, '+switch-master');
      const primary = await group.masterPort();
      expect(primary).not.toBe(old);
      let demoted = false;
      const demotion = group.logged(since, '+convert-to-slave', `127.0.0.1:${old} `).then(() => (demoted = true));
      // From now until every subscription is back, on the new primary: none on a replica.
      let back = false;
      const onReplicas = watchReplicas(
        all.map((entry) => entry.channel),
        () => back,
      );

      // 'during': the holder's client moves to the new primary (its waiter's stays on the old
      // one, still a primary) and releases there. PUBLISH counts nobody, the release passes the
      // waiter over (keeping its entry, marked) and frees the lock, and the waiter hears nothing.
      for (const entry of during) {
        const ready = new Promise<void>((resolve) => entry.holderClient.once('ready', resolve));
        entry.holderClient.disconnect(true);
        await ready;
        await entry.holder.release();
        const keys = lockKeys(entry.prefix, entry.name);
        expect(await raw(primary).exists(keys.lock), entry.label).toBe(0);
        // Passed over once, not dropped (its process may be between two subscriptions): its entry
        // keeps its place, marked " -" (docs/safety.md, "A waiter nobody hears").
        const members = (await raw(primary).zrange(keys.queue, '0', '-1')) as string[];
        expect(members, entry.label).toHaveLength(1);
        expect(await raw(primary).hget(keys.alive, members[0]!), entry.label).toMatch(/ -$/);
      }
      expect(demoted, 'the old primary was demoted before the releases: nothing was tested').toBe(false);
      expect(during.map((entry) => entry.settledAt())).toEqual(during.map(() => undefined));

      await demotion;
      // Every waiter's subscription reconnected, to the new primary.
      for (const entry of all) await until(async () => (await subscribers(primary, entry.channel)) === 1, `${entry.label}: the subscription on the new primary`);
      back = true;
      expect(await onReplicas).toEqual([]);

      // 'during': the waiter, woken by its reconnect, took the free lock itself.
      for (const entry of during) await expectExclusive(entry, await entry.waiting, primary);
      // 'after': the release on the new primary grants the lock; the waiter has it at once.
      for (const entry of after) {
        const released = performance.now();
        await entry.holder.release();
        const lease = await entry.waiting;
        expect(entry.settledAt()! - released, entry.label).toBeLessThan(1000); // its recheck is 60 s
        await expectExclusive(entry, lease, primary);
      }
    },
    45_000,
  );

  it(
    'a release on the old primary before Sentinel demotes it: without replica acknowledgement the waiter it grants the lock to holds a lease lost with the old primary (the documented failover loss); with it, no lease is handed out',
    async () => {
      const old = await group.masterPort();
      const plain = await Promise.all(CELLS.map((cell) => queue(cell, 'plain', old)));
      const acked = await Promise.all(CELLS.map((cell) => queue(cell, 'acked', old, { replication: { replicas: 1, timeout: 500 } })));
      await replicated(old);

      const since = group.mark();
      await group.failover();
      await group.logged(since, '+switch-master');
      const primary = await group.masterPort();
      let demoted = false;
      const demotion = group.logged(since, '+convert-to-slave', `127.0.0.1:${old} `).then(() => (demoted = true));

      // The holders' clients are still on the old primary: the releases run there.
      for (const entry of [...plain, ...acked]) await entry.holder.release();
      const granted = await Promise.all(plain.map((entry) => entry.waiting));
      // The old primary has no replica left: nobody acknowledges the waiter's acquire.
      for (const entry of acked) await expect(entry.waiting, entry.label).rejects.toBeInstanceOf(ReplicationError);
      expect(demoted, 'the old primary was demoted before the releases: nothing was tested').toBe(false);

      await demotion;
      // The new primary never saw the releases: each lock is still its holder's, with its fence.
      for (const entry of [...plain, ...acked]) {
        const keys = lockKeys(entry.prefix, entry.name);
        expect(Number(await raw(primary).get(keys.fence)), entry.label).toBe(entry.holder.fence);
        expect(await entry.other.tryAcquire(entry.name), entry.label).toBeNull();
      }
      // Without acknowledgement, the waiter's lease went with the old primary's data.
      for (const [i, lease] of granted.entries()) await expect(lease.extend(), plain[i]!.label).rejects.toBeInstanceOf(LeaseLostError);
    },
    45_000,
  );
});
