/**
 * The calls of latchkey's scripts on one Redis, and their replies: the keys and arguments each
 * call sends (the optional ones only when needed: fewer arguments are less work for the client
 * and for Redis), and the narrowing of each reply. Shared by the Redis backend and Redlock's nodes.
 */
import { BackendError } from '../errors.js';
import type { LockKeys } from '../keys.js';
import type { LuaScript } from '../lua/lua-script.js';
import { asInteger, asPair } from '../lua/run-script.js';
import { acquireScript, inspectScript, keepQueuedScript, releaseScript, semaphoreReleaseScript, wakeReleaseScript } from '../lua/scripts.generated.js';
import type { AcquireReply, HandOff, KeepReply, KeptEntry, LockSnapshot, OwnershipReply, QueueEntry, ReleaseReply } from './backend.js';

/** One script call's keys and arguments. Built once, it can go to every node of a Redlock: the clients never write to them. */
export interface ScriptCall {
  readonly keys: readonly string[];
  readonly args: readonly string[];
}

/**
 * acquire.lua's keys and arguments: the queue's only for a caller that queues (the script's
 * optional ones); `fenceFloor` on a Redlock node (see acquire.lua), none on a single Redis. The
 * common call, a free lock on a single Redis, is two keys and two arguments.
 */
export function acquireCall(keys: LockKeys, token: string, ttl: number, queue?: QueueEntry, fenceFloor?: number): ScriptCall {
  const ttlArg = String(ttl);
  if (queue) {
    const floor = fenceFloor === undefined ? '' : String(fenceFloor);
    return { keys: [keys.lock, keys.fence, keys.queue, keys.alive], args: [token, ttlArg, floor, queue.member, String(queue.entryTtl)] };
  }
  return { keys: [keys.lock, keys.fence], args: fenceFloor === undefined ? [token, ttlArg] : [token, ttlArg, String(fenceFloor)] };
}

export const parseAcquire = (reply: unknown): AcquireReply => acquireReply(reply, acquireScript);
export const parseWakeRelease = (reply: unknown): ReleaseReply => ownership(asInteger(reply, wakeReleaseScript), 'release');
export const parseSemaphoreRelease = (reply: unknown): ReleaseReply => (asInteger(reply, semaphoreReleaseScript) === 1 ? 'ok' : 'gone');
/** release.lua's reply: a bare status (1 released, 0 gone, -1 taken), or `{2, fence}` for a hand-off. */
export const parseRelease = (reply: unknown): ReleaseReply => {
  if (reply === 1) return 'ok'; // the common reply, first
  if (!Array.isArray(reply)) return ownership(asInteger(reply, releaseScript), 'release');
  const [status, fence] = asPair(reply, releaseScript);
  if (status !== 2) throw new BackendError('release', `unexpected reply ${JSON.stringify(reply)}`);
  return { handedOff: fence };
};

/**
 * An acquire script's reply: acquire.lua answers a bare fence when it acquired (the cheapest reply
 * for the common case), semaphore-acquire.lua and compat-acquire.lua `{1, fence}`; all `{0, pttl}`
 * when busy, acquire.lua and compat-acquire.lua `{0, pttl, tag}` when the holding token has a
 * manager's tag.
 */
export function acquireReply(reply: unknown, script: LuaScript): AcquireReply {
  if (!Array.isArray(reply)) return { acquired: true, fence: asInteger(reply, script) };
  const tag: unknown = reply[2];
  if (reply.length === 3 && typeof tag === 'string') {
    const [status, pttl] = asPair(reply.slice(0, 2), script);
    if (status === 0) return { acquired: false, ttl: pttl, holderTag: tag };
  }
  const [status, value] = asPair(reply, script);
  return status === 1 ? { acquired: true, fence: value } : { acquired: false, ttl: value };
}

/** release.lua's arguments: the optional ones (Cluster's SPUBLISH flag, a hand-off) only when needed, trailing. */
export function releaseArgs(token: string, inboxAt: string, sharded: string, handOff: HandOff | undefined): string[] {
  if (handOff) return [token, inboxAt, sharded, handOff.token, String(handOff.ttl), handOff.passOn ? '1' : '0'];
  return sharded === '1' ? [token, inboxAt, sharded] : [token, inboxAt];
}

/** keep-queued.lua's keys and arguments for a batch: three keys per waiter, and the members in one argument. */
export function keepQueuedCall(waiters: readonly KeptEntry[], entryTtl: number, inboxes?: string): ScriptCall {
  const keys: string[] = [];
  const members: string[] = [];
  for (const w of waiters) {
    keys.push(w.keys.lock, w.keys.queue, w.keys.alive);
    members.push(w.member);
  }
  const args = [String(entryTtl), members.join(' ')];
  if (inboxes !== undefined) args.push(inboxes);
  return { keys, args };
}

/** keep-queued.lua's reply: one code per waiter (see the script's header). */
export function keepReplies(reply: unknown, count: number): KeepReply[] {
  if (!Array.isArray(reply) || reply.length !== count) {
    throw new BackendError(keepQueuedScript.name, `unexpected reply ${JSON.stringify(reply)} (expected ${count} codes)`);
  }
  return reply.map((code): KeepReply => {
    const n = asInteger(code, keepQueuedScript);
    if (n > 0 || n === -1) return n;
    if (n === -2) return 'free';
    if (n === -3) return 'gone';
    if (n === -4) return 'told';
    if (n === 0) return 'free'; // expired at the very moment PTTL read it
    throw new BackendError(keepQueuedScript.name, `unexpected code ${n}`);
  });
}

export function ownership(code: number, operation: string): OwnershipReply {
  if (code === 1) return 'ok';
  if (code === 0) return 'gone';
  if (code === -1) return 'taken';
  throw new BackendError(operation, `unexpected reply ${code}`);
}

/** The fences of the scripts (max(last + 1, TIME in µs)) are the server's clock when issued, in µs, unless the clock went back. */
const MICROSECOND_FENCES = 1e15;

/**
 * Narrows inspect.lua's reply (or compat-inspect.lua's: the same shape). `since` comes from the
 * fence: the last fence issued is the current lease's, and a fence is the server's TIME in µs
 * when it was issued (or one more than the fence before, within the same µs).
 */
export function asSnapshot(reply: unknown, script: LuaScript = inspectScript): LockSnapshot {
  if (!Array.isArray(reply) || reply.length !== 4) {
    throw new BackendError(script.name, `unexpected reply ${JSON.stringify(reply)} (expected 4 fields)`);
  }
  const [token, pttl, fenceReply, queued] = reply as unknown[];
  const held = typeof token === 'string';
  const ttl = asInteger(pttl, script);
  const fence = fenceReply === null || fenceReply === undefined || fenceReply === false ? null : asInteger(fenceReply, script);
  return {
    token: held ? token : null,
    ttl: held ? ttl : 0,
    fence,
    queued: asInteger(queued, script),
    since: held && fence !== null && fence > MICROSECOND_FENCES && !token.startsWith('legacy:') ? Math.floor(fence / 1000) : null,
  };
}
