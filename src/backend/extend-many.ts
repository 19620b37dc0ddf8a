/**
 * The batched renewal on one Redis: extend-many.lua, {@link MAX_BATCH} leases of one TTL a call at
 * most, the calls pipelined on the client's connection. Kept apart from redis-backend.ts, which only
 * decides when it applies (not on a Cluster client, not with replica acknowledgement).
 */
import type { ScriptClient } from '../client/script-client.js';
import { BackendError, WrongTypeError } from '../errors.js';
import { asInteger, runScript } from '../lua/run-script.js';
import { extendManyScript } from '../lua/scripts.generated.js';
import { MAX_BATCH, type ExtendItem, type ExtendManyReply, type OwnershipReply } from './backend.js';

/** extend-many.lua's status for one lease, as a reply (or the error of that lease alone). */
function statusOf(code: number, item: ExtendItem): OwnershipReply | Error {
  if (code === 1) return 'ok';
  if (code === 0) return 'gone';
  if (code === -1) return 'taken';
  if (code === -2) return new WrongTypeError(extendManyScript.name, item.keys.lock, undefined);
  return new BackendError(extendManyScript.name, `unexpected status ${code}`);
}

/** One call of extend-many.lua for at most {@link MAX_BATCH} leases of one TTL. */
async function extendChunk(client: ScriptClient, items: readonly ExtendItem[]): Promise<ExtendManyReply> {
  const keys = items.map((item) => item.keys.lock);
  const args = [String(items[0]!.ttl), ...items.map((item) => item.token)];
  const reply = await runScript(client, extendManyScript, keys, args);
  if (!Array.isArray(reply) || reply.length !== items.length) {
    throw new BackendError(extendManyScript.name, `unexpected reply ${JSON.stringify(reply)} (expected ${items.length} statuses)`);
  }
  return reply.map((code, i) => statusOf(asInteger(code, extendManyScript), items[i]!));
}

/**
 * Renews `items` (plain locks on one Redis) in calls of extend-many.lua of at most
 * {@link MAX_BATCH} leases of one TTL each (one TTL sent per call, not one per lease), sent
 * together. Rejects when any call fails: no lease's outcome is taken as known then (a renewal that
 * did run is repeated harmlessly).
 */
export async function extendManyOn(client: ScriptClient, items: readonly ExtendItem[]): Promise<ExtendManyReply> {
  const ttl = items[0]?.ttl;
  if (items.length <= MAX_BATCH && items.every((item) => item.ttl === ttl)) return extendChunk(client, items);
  const byTtl = new Map<number, number[]>();
  items.forEach((item, i) => {
    const same = byTtl.get(item.ttl);
    if (same) same.push(i);
    else byTtl.set(item.ttl, [i]);
  });
  const calls: Promise<void>[] = [];
  const replies: (OwnershipReply | Error)[] = new Array<OwnershipReply | Error>(items.length);
  for (const indices of byTtl.values()) {
    for (let start = 0; start < indices.length; start += MAX_BATCH) {
      const part = indices.slice(start, start + MAX_BATCH);
      calls.push(extendChunk(client, part.map((i) => items[i]!)).then((got) => part.forEach((i, j) => (replies[i] = got[j]!))));
    }
  }
  await Promise.all(calls);
  return replies;
}
