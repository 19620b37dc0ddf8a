/**
 * A slot migration by hand on a {@link RedisCluster}, the way `redis-cli --cluster reshard` does
 * one, but with its steps apart so that a test can hold the slot open as long as it likes:
 *
 *   1. target: CLUSTER SETSLOT <slot> IMPORTING <source id>
 *   2. source: CLUSTER SETSLOT <slot> MIGRATING <target id>
 *   3. (optional) MIGRATE of the slot's keys from the source to the target, in batches
 *   4. finish: CLUSTER SETSLOT <slot> NODE <target id> on the target, the source and every other
 *      master; or abort: the source forgets the migration (CLUSTER SETSLOT <slot> STABLE), the
 *      keys moved so far go back to it, and the target forgets it too.
 *
 * While the slot is open the source answers a command on keys of the slot when it holds all of
 * them, ASK (go to the target) when it holds none, TRYAGAIN when it holds some; the target
 * answers an ASKING client's command when it holds every key (or it names one key).
 */
import type { ClusterNode, RedisCluster } from './redis-cluster.js';

const POLL_MS = 50;
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** CLUSTER SLOTS: [[start, end, [host, port, id, ...], ...replicas], ...] */
type SlotsReply = Array<[number, number, [string, number, string, ...unknown[]], ...unknown[]]>;

export interface SlotMigration {
  readonly slot: number;
  readonly source: ClusterNode;
  readonly target: ClusterNode;
  /** Keys moved to the target so far. */
  readonly moved: number;
  /** MIGRATEs every key of the slot still on the source to the target (the slot stays open); resolves to how many moved. */
  moveKeys(): Promise<number>;
  /** Moves what is left, and gives the slot to the target on every master; resolves once every answering node routes it there. */
  finish(): Promise<void>;
  /** Brings back what moved, and closes the migration: the source keeps the slot. */
  abort(): Promise<void>;
}

/** Opens the migration of `key`'s slot from the master that serves it to `target` (default: another master). */
export async function startMigration(cluster: RedisCluster, key: string, target?: ClusterNode): Promise<SlotMigration> {
  await cluster.refreshTopology();
  const source = await cluster.masterForKey(key);
  const to = target ?? cluster.masters.find((m) => m !== source);
  if (!to || to === source) throw new Error(`no master other than port ${source.port} to migrate the slot of ${JSON.stringify(key)} to`);
  const slot = Number(await source.call('CLUSTER', 'KEYSLOT', key));
  await to.call('CLUSTER', 'SETSLOT', slot, 'IMPORTING', source.id);
  await source.call('CLUSTER', 'SETSLOT', slot, 'MIGRATING', to.id);
  let moved = 0;
  let closed = false;

  /** MIGRATEs the slot's keys from `from` to `into`, 100 at a time; how many moved. */
  const migrate = async (from: ClusterNode, into: ClusterNode): Promise<number> => {
    let count = 0;
    for (;;) {
      const keys = (await from.call('CLUSTER', 'GETKEYSINSLOT', slot, 100)) as string[];
      if (keys.length === 0) return count;
      const reply = await from.call('MIGRATE', into.host, into.port, '', 0, 5000, 'KEYS', ...keys);
      if (reply !== 'OK' && reply !== 'NOKEY') throw new Error(`MIGRATE from port ${from.port} to port ${into.port}: ${String(reply)}`);
      count += keys.length;
    }
  };
  const assertOpen = (): void => {
    if (closed) throw new Error(`the migration of slot ${slot} is already finished or aborted`);
  };

  return {
    slot,
    source,
    target: to,
    get moved() {
      return moved;
    },
    async moveKeys() {
      assertOpen();
      const count = await migrate(source, to);
      moved += count;
      return count;
    },
    async finish() {
      assertOpen();
      moved += await migrate(source, to);
      closed = true;
      // The target first: once the source gives the slot away it redirects (MOVED) every command.
      await to.call('CLUSTER', 'SETSLOT', slot, 'NODE', to.id);
      // The source refuses while it still holds keys of the slot (a script may have written one
      // since the last batch): those move too, and it is asked again.
      for (let round = 0; ; round++) {
        try {
          await source.call('CLUSTER', 'SETSLOT', slot, 'NODE', to.id);
          break;
        } catch (error) {
          if (round >= 20 || !/still hold keys/i.test(String(error))) throw error;
          moved += await migrate(source, to);
        }
      }
      for (const master of cluster.masters.filter((m) => m !== source && m !== to && m.answering)) {
        await master.call('CLUSTER', 'SETSLOT', slot, 'NODE', to.id);
      }
      await routedTo(cluster, slot, to);
    },
    async abort() {
      assertOpen();
      closed = true;
      // The source first: while it is MIGRATING it redirects (ASK) the keys coming back to it.
      await source.call('CLUSTER', 'SETSLOT', slot, 'STABLE');
      if (moved > 0) await migrate(to, source);
      await to.call('CLUSTER', 'SETSLOT', slot, 'STABLE');
    },
  };
}

/**
 * Opens the migration of `key`'s slot, keeps it open for `holdMs` (moving its keys first when
 * `moveKeys`, so that the lock lives on the target while the source still owns the slot), then
 * finishes or aborts it. Resolves to the migration once it is over.
 */
export async function holdMigrating(
  cluster: RedisCluster,
  key: string,
  holdMs: number,
  options: { readonly moveKeys?: boolean; readonly end?: 'finish' | 'abort' } = {},
): Promise<SlotMigration> {
  const migration = await startMigration(cluster, key);
  try {
    if (options.moveKeys) await migration.moveKeys();
    await sleep(holdMs);
  } finally {
    if ((options.end ?? 'finish') === 'finish') await migration.finish();
    else await migration.abort();
  }
  return migration;
}

/** Waits until every answering node routes `slot` to `owner` (CLUSTER SLOTS). */
async function routedTo(cluster: RedisCluster, slot: number, owner: ClusterNode, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    let pending: string | undefined;
    for (const node of cluster.nodes.filter((n) => n.answering)) {
      const slots = (await node.call('CLUSTER', 'SLOTS')) as SlotsReply;
      const range = slots.find(([start, end]) => slot >= start && slot <= end);
      if (!range || Number(range[2][1]) !== owner.port) {
        pending = `port ${node.port} routes slot ${slot} to ${range ? `port ${range[2][1]}` : 'nobody'}`;
        break;
      }
    }
    if (pending === undefined) return;
    last = pending;
    if (Date.now() >= deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for slot ${slot} to move to port ${owner.port}; last: ${last}`);
    await sleep(POLL_MS);
  }
}
