/**
 * Redis Cluster while a lock's slot migrates (a reshard: CLUSTER SETSLOT MIGRATING on the source,
 * IMPORTING on the target, then MIGRATE of its keys). The source runs a command on keys of the
 * slot when all of them are on it, redirects it (ASK) when none is, and refuses it (TRYAGAIN) when
 * only some are; the target, asked, refuses one on several keys when any is missing. A script
 * naming a key that may not exist (a lock's queue, a fence counter not yet
 * written) next to one that does is thus refused for as long as the migration lasts, while a
 * script on one key runs wherever that key is. ioredis retries TRYAGAIN (16 times, 100 ms apart by
 * default) and then fails "Too many Cluster redirections"; node-redis fails at once.
 *
 * What latchkey does about it:
 *  - a renewal names the lock key alone (extend.lua), or, batched, the lock keys of one slot
 *    (extend-many.lua), which a migration that moved some of them refuses: such a batch is also
 *    sent one lease a call (cluster-batches.ts);
 *  - a release that is refused, or not answered within {@link FALLBACK_AFTER} ms, also frees the
 *    lock on its key alone (release-key.lua) and tells the queued waiters to look again
 *    (wake-queue.lua), both scripts on one key: {@link releaseOrFallBack};
 *  - so does a semaphore's (and a fair or read-write lock's) release, on its permits hash and
 *    holders set, or its permits hash alone (semaphore-release-key.lua): {@link releasePermitsOnKey};
 *  - an acquire that is refused counts as "busy, try again" for a waiter, until its deadline (see
 *    Waiter.attempt);
 *  - a waiter's leave (leave.lua, semaphore-leave.lua) that is refused takes it out of the queue on
 *    the queue key (leave-queue.lua), and its caller releases in case it was granted meanwhile:
 *    {@link leaveOrFallBack}.
 */
import { isSlotRefusal, type ScriptClient } from '../client/script-client.js';
import { now } from '../clock.js';
import { Deadlines, type Deadline } from '../deadlines.js';
import type { LockKeys } from '../keys.js';
import type { LuaScript } from '../lua/lua-script.js';
import { asInteger, runScript } from '../lua/run-script.js';
import { leaveQueueScript, releaseKeyScript, semaphoreReleaseKeyScript, wakeQueueScript } from '../lua/scripts.generated.js';
import type { OwnershipReply, ReleaseReply } from './backend.js';

/**
 * How long a release on a Cluster client waits for its reply before it also frees the lock on its
 * key alone, ms. A live cluster answers in far less; ioredis spends about 1.6 s retrying a refused
 * script before it reports it, more than a short lease may have left.
 */
export const FALLBACK_AFTER = 200;

/** The fallbacks' deadlines, on one timer (see {@link Deadlines}): a timer per release costs more than the rest of it. */
const fallbacks = new Deadlines();

/** How many queued waiters a fallback release tells to look again, from the head of the queue. */
const WAKE_COUNT = '16';

/** Tells the first queued waiters to look again (wake-queue.lua, on the queue key alone); not waited for. */
function wakeQueue(client: ScriptClient, keys: LockKeys, inboxAt: string, sharded: string): void {
  void runScript(client, wakeQueueScript, [keys.queue], [inboxAt, sharded, WAKE_COUNT]).catch(() => {});
}

/**
 * `script` on `keys`, or, when Redis refuses that for where the keys are (a migration that moved
 * some of them and not yet the others), on `fewer` of them.
 */
function onKeysOrFewer(client: ScriptClient, script: LuaScript, keys: readonly string[], fewer: readonly string[], args: readonly string[]): Promise<unknown> {
  return runScript(client, script, keys, args).catch((error: unknown) => {
    if (!isSlotRefusal(error)) throw error;
    return runScript(client, script, fewer, args);
  });
}

/**
 * The fallback of a release on a Cluster: frees the lock on its key alone, only if it holds
 * `token`; once freed, tells the first queued waiters to look again (not waited for: the queue key
 * is its own call, and nobody else can take the lock while the slot migrates anyway).
 */
export async function releaseOnKey(client: ScriptClient, keys: LockKeys, token: string, inboxAt: string, sharded: string): Promise<OwnershipReply> {
  const code = asInteger(await runScript(client, releaseKeyScript, [keys.lock], [token]), releaseKeyScript);
  if (code === 1) {
    wakeQueue(client, keys, inboxAt, sharded);
    return 'ok';
  }
  return code === 0 ? 'gone' : 'taken';
}

/**
 * The fallback of a semaphore's release on a Cluster: gives back the permits of `token` on the
 * permits hash and the holders set (they exist together while it holds permits), or, should that
 * be refused too (a migration that moved one of them and not yet the other), on the permits hash
 * alone: the holders set's entry then goes at its expiry. Once given back, tells the first queued
 * waiters to look again (not waited for, like {@link releaseOnKey}'s).
 */
export async function releasePermitsOnKey(client: ScriptClient, keys: LockKeys, token: string, inboxAt: string, sharded: string): Promise<OwnershipReply> {
  const script = semaphoreReleaseKeyScript;
  const reply = await onKeysOrFewer(client, script, [keys.holder, keys.lock], [keys.holder], [token]);
  if (asInteger(reply, script) !== 1) return 'gone';
  wakeQueue(client, keys, inboxAt, sharded);
  return 'ok';
}

/**
 * A release on a Cluster client: `full` (release.lua or wake-release.lua, on every key of the
 * lock), and `fallback` ({@link releaseOnKey}) when `full` is refused for where its keys are
 * ({@link isSlotRefusal}) or has not answered within `after` ms. Both delete only the caller's
 * token, so either may run first, and the one that runs second finds the lock gone or someone
 * else's (a full release retried by the client after the migration, say: it changes nothing).
 *
 * Resolves with `full`'s reply when it comes, or with 'ok' as soon as the fallback freed the lock.
 * A fallback that found the lock not ours leaves the answer to `full` (it may have run first); if
 * `full` is refused, that finding is the answer. `full` failing otherwise fails the release as it
 * always did, unless a fallback already under way frees the lock.
 */
export function releaseOrFallBack(full: Promise<ReleaseReply>, fallback: () => Promise<OwnershipReply>, after = FALLBACK_AFTER): Promise<ReleaseReply> {
  return new Promise<ReleaseReply>((resolve, reject) => {
    let done = false;
    let fell: Promise<OwnershipReply> | undefined;
    /** What the fallback found, once it did. */
    let found: { reply: OwnershipReply } | { error: unknown } | undefined;
    /** Why `full` failed, once it did: the fallback then decides. */
    let failed: { error: unknown } | undefined;
    const deadline: Deadline = { at: now() + after, expire: () => fallBack() };
    fallbacks.watch(deadline);
    const settle = (outcome: { reply: ReleaseReply } | { error: unknown }): void => {
      if (done) return;
      done = true;
      fallbacks.delete(deadline);
      if ('reply' in outcome) resolve(outcome.reply);
      else reject(outcome.error);
    };
    /** `full` failed and the fallback has spoken: a lock it freed is released; else full's refusal names what it found. */
    const decide = (): void => {
      if (!failed || !found) return;
      if ('reply' in found && found.reply === 'ok') settle(found);
      else if (isSlotRefusal(failed.error) && 'reply' in found) settle(found);
      else settle(failed);
    };
    const fallBack = (): void => {
      if (fell || done) return;
      fell = fallback();
      fell.then(
        (reply) => {
          found = { reply };
          if (reply === 'ok') settle(found);
          else decide();
        },
        (error: unknown) => {
          found = { error };
          decide();
        },
      );
    };
    full.then(
      (reply) => settle({ reply }),
      (error: unknown) => {
        failed = { error };
        if (fell) return decide();
        if (isSlotRefusal(error)) return fallBack();
        settle(failed);
      },
    );
  });
}

/**
 * A waiter's leave on a Cluster: `full` (leave.lua or semaphore-leave.lua: whether it was granted
 * the lock or permits meanwhile); when Redis refuses it for where its keys are, the waiter is taken
 * out of the queue on the queue key and its alive hash, or the queue key alone if that is refused
 * too (leave-queue.lua), and the answer is true: the caller then releases, which finds out whether
 * there is anything to release.
 */
export async function leaveOrFallBack(full: Promise<boolean>, client: ScriptClient, keys: LockKeys, member: string, inboxAt: string, sharded: string): Promise<boolean> {
  try {
    return await full;
  } catch (error) {
    if (!isSlotRefusal(error)) throw error;
  }
  await onKeysOrFewer(client, leaveQueueScript, [keys.queue, keys.alive], [keys.queue], [member, inboxAt, sharded]);
  return true;
}
