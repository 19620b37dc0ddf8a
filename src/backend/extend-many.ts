/**
 * The batched renewal on one Redis: extend-many.lua, {@link MAX_BATCH} leases of one TTL (and one
 * token length) a call at most, the calls pipelined on the client's connection. Kept apart from
 * redis-backend.ts, which only decides when it applies (per slot on a Cluster client: see
 * cluster-batches.ts; not with replica acknowledgement).
 */
import type { ScriptClient } from '../client/script-client.js';
import { BackendError, WrongTypeError } from '../errors.js';
import { asInteger, runScript } from '../lua/run-script.js';
import { extendManyScript } from '../lua/scripts.generated.js';
import { MAX_BATCH, type ExtendItem, type ExtendManyReply, type OwnershipReply } from './backend.js';

/** extend-many.lua's status for a lease it did not extend, as a reply (or the error of that lease alone). */
function statusOf(code: number, item: ExtendItem): OwnershipReply | Error {
  if (code === 0) return 'gone';
  if (code === -1) return 'taken';
  if (code === -2) return new WrongTypeError(extendManyScript.name, item.keys.lock, undefined);
  return new BackendError(extendManyScript.name, `unexpected status ${code}`);
}

/** One call of extend-many.lua for at most {@link MAX_BATCH} leases of one TTL and one token length. */
function extendChunk(client: ScriptClient, items: readonly ExtendItem[]): Promise<ExtendManyReply> {
  const keys = new Array<string>(items.length);
  let tokens = '';
  for (let i = 0; i < items.length; i++) {
    const item = items[i]!;
    keys[i] = item.keys.lock;
    tokens += item.token;
  }
  const args = [String(items[0]!.ttl), String(items[0]!.token.length), tokens];
  return runScript(client, extendManyScript, keys, args, (reply) => {
    // Only the leases not extended are answered, as (index, status) pairs.
    if (!Array.isArray(reply) || reply.length % 2 !== 0) {
      throw new BackendError(extendManyScript.name, `unexpected reply ${JSON.stringify(reply)} (expected pairs of index and status)`);
    }
    const replies = new Array<OwnershipReply | Error>(items.length).fill('ok');
    for (let j = 0; j < reply.length; j += 2) {
      const i = asInteger(reply[j], extendManyScript) - 1;
      const item = items[i];
      if (item === undefined) throw new BackendError(extendManyScript.name, `unexpected reply ${JSON.stringify(reply)} (index ${i + 1} of ${items.length})`);
      replies[i] = statusOf(asInteger(reply[j + 1], extendManyScript), item);
    }
    return replies;
  });
}

/** Whether all `items` have one TTL and one token length (nearly always: one manager's leases of one TTL). */
function alike(items: readonly ExtendItem[]): boolean {
  const ttl = items[0]?.ttl;
  const width = items[0]?.token.length;
  for (let i = 1; i < items.length; i++) {
    const item = items[i]!;
    if (item.ttl !== ttl || item.token.length !== width) return false;
  }
  return true;
}

/**
 * Renews `items` (plain locks on one Redis) in calls of extend-many.lua of at most
 * {@link MAX_BATCH} leases of one TTL and one token length each (a manager's tokens all have one
 * length), sent together. Rejects when any call fails: no lease's outcome is taken as known then
 * (a renewal that did run is repeated harmlessly).
 */
export async function extendManyOn(client: ScriptClient, items: readonly ExtendItem[]): Promise<ExtendManyReply> {
  if (items.length <= MAX_BATCH && alike(items)) return extendChunk(client, items);
  const calls: Promise<void>[] = [];
  const replies: (OwnershipReply | Error)[] = new Array<OwnershipReply | Error>(items.length);
  for (const indices of indicesBy(items, (item) => `${item.ttl}/${item.token.length}`)) {
    for (let start = 0; start < indices.length; start += MAX_BATCH) {
      const part = indices.slice(start, start + MAX_BATCH);
      calls.push(extendChunk(client, part.map((i) => items[i]!)).then((got) => part.forEach((i, j) => (replies[i] = got[j]!))));
    }
  }
  await Promise.all(calls);
  return replies;
}

/** The indices of `items`, grouped by `keyOf`, each group in order (the groups in order of first appearance). */
export function indicesBy<I, K>(items: readonly I[], keyOf: (item: I) => K): IterableIterator<number[]> {
  const groups = new Map<K, number[]>();
  items.forEach((item, i) => {
    const key = keyOf(item);
    const group = groups.get(key);
    if (group) group.push(i);
    else groups.set(key, [i]);
  });
  return groups.values();
}
