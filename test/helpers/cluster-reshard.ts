/**
 * Moves one slot, with its keys, from one master of a test cluster to another, the way
 * `redis-cli --cluster reshard` does: SETSLOT IMPORTING on the target, SETSLOT MIGRATING on the
 * source, MIGRATE of the slot's keys in batches, then SETSLOT NODE on the target, the source and
 * every other master. Resolves once every answering node routes the slot to the target.
 */
import type { ClusterNode, RedisCluster } from './redis-cluster.js';

/** CLUSTER SLOTS: [[start, end, [host, port, id, ...], ...replicas], ...] */
type SlotsReply = Array<[number, number, [string, number, string, ...unknown[]], ...unknown[]]>;

const POLL_MS = 20;

/** The slot of `key`, as the cluster computes it. */
export async function slotOf(cluster: RedisCluster, key: string): Promise<number> {
  const node = cluster.nodes.find((n) => n.answering);
  if (!node) throw new Error('no answering node');
  return Number(await node.call('CLUSTER', 'KEYSLOT', key));
}

/** Another master than `source`, to move a slot to. */
export function otherMaster(cluster: RedisCluster, source: ClusterNode): ClusterNode {
  const target = cluster.masters.find((m) => m !== source);
  if (!target) throw new Error(`no master besides port ${source.port}`);
  return target;
}

/**
 * Moves `slot` from `source` to `target` (both masters), keys included, and waits (up to
 * `timeoutMs`) until every answering node routes it to `target`.
 */
export async function moveSlot(cluster: RedisCluster, slot: number, source: ClusterNode, target: ClusterNode, timeoutMs = 10_000): Promise<void> {
  await cluster.refreshTopology();
  if (!source.id || !target.id) throw new Error('node ids unknown: refreshTopology first');
  await target.call('CLUSTER', 'SETSLOT', slot, 'IMPORTING', source.id);
  await source.call('CLUSTER', 'SETSLOT', slot, 'MIGRATING', target.id);
  for (;;) {
    const keys = (await source.call('CLUSTER', 'GETKEYSINSLOT', slot, 100)) as string[];
    if (keys.length === 0) break;
    await source.call('MIGRATE', target.host, target.port, '', 0, 5000, 'KEYS', ...keys);
  }
  // The target first (it then serves the slot), the source next (it stops redirecting with ASK), then the rest.
  const masters = [target, source, ...cluster.masters.filter((m) => m !== target && m !== source)];
  for (const master of masters) await master.call('CLUSTER', 'SETSLOT', slot, 'NODE', target.id);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const pending: string[] = [];
    for (const node of cluster.nodes.filter((n) => n.answering)) {
      const slots = (await node.call('CLUSTER', 'SLOTS')) as SlotsReply;
      const range = slots.find(([start, end]) => slot >= start && slot <= end);
      if (!range || Number(range[2][1]) !== target.port) pending.push(`port ${node.port}`);
    }
    if (pending.length === 0) break;
    if (Date.now() > deadline) throw new Error(`slot ${slot} not routed to port ${target.port} by ${pending.join(', ')} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
  await cluster.refreshTopology();
}
