/**
 * The batched renewal on one Redis: extend-many.lua, {@link MAX_BATCH} leases a call at most, the
 * calls pipelined on the client's connection. Kept apart from redis-backend.ts, which only
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

/** One call of extend-many.lua for at most {@link MAX_BATCH} leases. */
async function extendChunk(client: ScriptClient, items: readonly ExtendItem[]): Promise<ExtendManyReply> {
  const keys = items.map((item) => item.keys.lock);
  const args = [...items.map((item) => item.token), ...items.map((item) => String(item.ttl))];
  const reply = await runScript(client, extendManyScript, keys, args);
  if (!Array.isArray(reply) || reply.length !== items.length) {
    throw new BackendError(extendManyScript.name, `unexpected reply ${JSON.stringify(reply)} (expected ${items.length} statuses)`);
  }
  return reply.map((code, i) => statusOf(asInteger(code, extendManyScript), items[i]!));
}

/**
 * Renews `items` (plain locks on one Redis) in ceil(n / {@link MAX_BATCH}) calls of
 * extend-many.lua, sent together. Rejects when any call fails: no lease's outcome is taken as
 * known then (a renewal that did run is repeated harmlessly).
 */
export async function extendManyOn(client: ScriptClient, items: readonly ExtendItem[]): Promise<ExtendManyReply> {
  if (items.length <= MAX_BATCH) return extendChunk(client, items);
  const calls: Promise<ExtendManyReply>[] = [];
  for (let start = 0; start < items.length; start += MAX_BATCH) calls.push(extendChunk(client, items.slice(start, start + MAX_BATCH)));
  return (await Promise.all(calls)).flat();
}
