/**
 * Waiters on a Redis Cluster whose topology moves (test/integration/redis-cluster-topology.test.ts):
 * managers on either cluster client, where a waiter's inbox channel is heard, and how long a
 * wake-up takes. Waiting for a subscription polls PUBSUB SHARDNUMSUB on the slot's master: no
 * event announces it.
 */
import { Cluster } from 'ioredis';
import { Cluster as Cluster5 } from 'ioredis5';
import { createCluster } from 'redis';
import { GlideClusterClient, Logger as GlideLogger } from '@valkey/valkey-glide';
import { createLocks, type Lease, type Locks } from '../../src/index.js';
import type { LockKeys } from '../../src/keys.js';
import type { ClusterNode, RedisCluster } from './redis-cluster.js';

export type ClusterClientName = 'ioredis' | 'ioredis5' | 'node-redis' | 'glide';

/**
 * The bound on a wake-up after a release once the topology has settled, ms, and the slack a loaded
 * 2-core machine gets on top (a run beside four busy loops took 88 ms once, where 1-17 ms is usual):
 * far below what would wake a waiter whose notification was lost (the inbox's 5 s check, the 60 s
 * recheck of these tests).
 */
export const WAKE_BOUND_MS = 50;
export const WAKE_SLACK_MS = 100;

/**
 * For the clients whose inbox learns of a move at once (GLIDE through latchkey's watch of its
 * subscriptions, every 50 ms), the bound on how long after a move its channel is heard again on the
 * slot's master, and on a wake-up after a release sent in that gap, ms. The watch, a probe, leaving
 * and joining the channel and a probe again take 20–50 ms; 1000 leaves room for a loaded 2-core
 * machine and stays well under what it would be without latchkey's watch: GLIDE's own
 * resubscription (about 3 s, and after a failover on the demoted master) or the inbox's 5 s audit.
 */
export const PROMPT_BOUND_MS: Partial<Record<ClusterClientName, number>> = { glide: 1000 };

/** A manager over a new client of the named kind; `cleanup` closes both. */
export async function clusterManager(
  cluster: RedisCluster,
  kind: ClusterClientName,
  cleanup: Array<() => Promise<unknown>>,
  settings: { prefix: string; recheck?: number },
): Promise<Locks> {
  if (kind === 'ioredis' || kind === 'ioredis5') {
    const client = kind === 'ioredis' ? new Cluster(cluster.startupNodes) : new Cluster5(cluster.startupNodes);
    client.on('error', () => {});
    const locks = createLocks({ ...settings, redis: client });
    cleanup.push(async () => {
      await locks.close();
      client.disconnect();
    });
    return locks;
  }
  if (kind === 'glide') {
    GlideLogger.setLoggerConfig('error');
    const client = await GlideClusterClient.createClient({ addresses: cluster.startupNodes, requestTimeout: 2000 });
    const locks = createLocks({ ...settings, redis: client });
    cleanup.push(async () => {
      await locks.close();
      client.close();
    });
    return locks;
  }
  const client = createCluster({ rootNodes: cluster.rootNodes });
  client.on('error', () => {});
  await client.connect();
  const locks = createLocks({ ...settings, redis: client });
  cleanup.push(async () => {
    await locks.close();
    await client.close().catch(() => client.destroy());
  });
  return locks;
}

const pause = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The members queued for a lock, as its slot's master has them, once there are `count`. */
export async function queuedMembers(cluster: RedisCluster, keys: LockKeys, count: number, timeoutMs = 10_000): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const master = await cluster.masterForKey(keys.lock);
    const members = (await master.call('ZRANGE', keys.queue, '0', '-1')) as string[];
    if (members.length >= count) return members;
    if (Date.now() > deadline) throw new Error(`${members.length} waiters queued for ${keys.lock}, expected ${count}`);
    await pause(5);
  }
}

/** The sharded channel a queued waiter is told on: `<lock key>:inbox:<its manager>`. */
export function inboxChannel(keys: LockKeys, member: string): string {
  return `${keys.lock}:inbox:${member.slice(0, member.lastIndexOf(':'))}`;
}

/** How many subscribers `node` counts on `channel` (what a release's SPUBLISH there counts). */
export async function heardOn(node: ClusterNode, channel: string): Promise<number> {
  const reply = (await node.call('PUBSUB', 'SHARDNUMSUB', channel)) as [string, number];
  return Number(reply[1]);
}

/**
 * Ms until every channel is heard on its slot's master (the one serving `keys` now), or -1 when
 * it is not after `timeoutMs` (the inbox did not follow the topology).
 */
export async function untilHeard(cluster: RedisCluster, keys: LockKeys, channels: readonly string[], timeoutMs = 10_000): Promise<number> {
  const started = performance.now();
  for (;;) {
    const master = await cluster.masterForKey(keys.lock).catch(() => undefined);
    if (master) {
      const counts = await Promise.all(channels.map((c) => heardOn(master, c).catch(() => 0)));
      if (counts.every((n) => n > 0)) return Math.round(performance.now() - started);
    }
    if (performance.now() - started > timeoutMs) return -1;
    await pause(10);
  }
}

/** A lease and when its acquire resolved (performance.now()). */
export interface Stamped {
  readonly lease: Lease;
  readonly at: number;
}

export function stamped(acquiring: Promise<Lease>): Promise<Stamped> {
  return acquiring.then((lease) => ({ lease, at: performance.now() }));
}

/** The stamped lease, or undefined after `ms` (a waiter that was not woken in time). */
export function within(waiting: Promise<Stamped>, ms: number): Promise<Stamped | undefined> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    waiting,
    new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
