/**
 * Batches on a Redis Cluster client: a script's keys must share a slot, so the leases of a batch
 * of renewals, or the waiters of a batch of the queue keeper's, are grouped by their lock key's
 * slot, one script call per slot, the calls pipelined to their masters by the client. Lock names
 * are their keys' hash tags, so locks share a slot by chance: a handful among 16,384 slots, many
 * at 100,000 leases (about 6 each), where the calls a round fall from one per lease to one per
 * slot.
 *
 * Renewals: one extend-many.lua call per slot (at most {@link MAX_BATCH} leases).
 * While a slot migrates, a call on several of its keys is refused (TRYAGAIN: see
 * cluster-migration.ts), and ioredis retries it for about 1.6 s before it says so, more than a
 * short lease may have left. A group that is refused, or not answered within
 * {@link FALLBACK_AFTER} ms, is also renewed one lease a call (extend.lua names the lock key
 * alone, which runs wherever that key is). Both only extend a key that holds the lease's token,
 * so either may run first; the first answer counts, and a lease's validity counts from when the
 * batch was sent, before either ran.
 */
import slotOf from 'cluster-key-slot';
import { isSlotRefusal, type ScriptClient } from '../client/script-client.js';
import { now } from '../clock.js';
import { Deadlines, type Deadline } from '../deadlines.js';
import { runScript } from '../lua/run-script.js';
import { keepQueuedScript } from '../lua/scripts.generated.js';
import type { ExtendItem, ExtendManyPart, ExtendManyReply, KeepReply, KeptEntry, OwnershipReply } from './backend.js';
import { FALLBACK_AFTER } from './cluster-migration.js';
import { extendManyOn, indicesBy } from './extend-many.js';
import { keepQueuedCall, keepReplies } from './redis-calls.js';

/** The groups' deadlines (a renewal's fallback, a keeper's call given up), on one timer. */
const fallbacks = new Deadlines();

const asError = (error: unknown): Error => (error instanceof Error ? error : new Error(String(error)));

/**
 * Renews `items` on a Cluster client, one extend-many.lua call per slot (see above); `alone`
 * extends one lease by itself (Backend.extend). Resolves to one reply per item, in order; a group
 * that failed gives each of its leases the error (each is retried by the watchdog's rules).
 * `onPart` is given each group's replies as they come.
 */
export async function extendManyBySlot(client: ScriptClient, items: readonly ExtendItem[], alone: (item: ExtendItem) => Promise<OwnershipReply>, onPart?: ExtendManyPart): Promise<ExtendManyReply> {
  return perSlot(items, (group) => groupOrAlone(client, group, alone), onPart);
}

/**
 * The queue keeper's batch on a Cluster client: one keep-queued.lua call per slot. A call that
 * fails (a slot that migrates: TRYAGAIN; a node down) or is not answered within
 * {@link FALLBACK_AFTER} ms answers `unknown` for its waiters, who then look for themselves, as
 * after any failed batch; the other slots' waiters are kept, and the keeper's next batch is not
 * held back by one slow node.
 */
export function keepQueuedBySlot(client: ScriptClient, waiters: readonly KeptEntry[], entryTtl: number): Promise<KeepReply[]> {
  return perSlot(
    waiters,
    (group) =>
      new Promise<KeepReply[]>((resolve) => {
        let done = false;
        const settle = (replies: KeepReply[]): void => {
          if (done) return;
          done = true;
          fallbacks.delete(deadline);
          resolve(replies);
        };
        const unknown = (): void => settle(group.map((): KeepReply => 'unknown'));
        const deadline: Deadline = { at: now() + FALLBACK_AFTER, expire: unknown };
        fallbacks.watch(deadline);
        const call = keepQueuedCall(group, entryTtl);
        runScript(client, keepQueuedScript, call.keys, call.args, (reply) => keepReplies(reply, group.length)).then(settle, unknown);
      }),
  );
}

/**
 * `items` grouped by their lock key's slot, `run` once per group (together), the replies put back
 * in order; `onPart` sees each group's as they come.
 */
async function perSlot<I extends { readonly keys: { readonly lock: string } }, R>(
  items: readonly I[],
  run: (group: I[]) => Promise<readonly R[]>,
  onPart?: (indices: readonly number[], replies: readonly R[]) => void,
): Promise<R[]> {
  const replies = new Array<R>(items.length);
  await Promise.all(
    [...indicesBy(items, (item) => slotOf(item.keys.lock))].map((indices) =>
      run(indices.map((i) => items[i]!)).then((got) => {
        indices.forEach((i, j) => (replies[i] = got[j]!));
        onPart?.(indices, got);
      }),
    ),
  );
  return replies;
}

/** One slot's leases: its batch, or each lease alone when the batch is refused or slow; never rejects. */
function groupOrAlone(client: ScriptClient, group: readonly ExtendItem[], alone: (item: ExtendItem) => Promise<OwnershipReply>): Promise<ExtendManyReply> {
  return new Promise((resolve) => {
    let done = false;
    let fell = false;
    const settle = (replies: ExtendManyReply): void => {
      if (done) return;
      done = true;
      fallbacks.delete(deadline);
      resolve(replies);
    };
    const fallBack = (): void => {
      if (done || fell) return;
      fell = true;
      void Promise.all(group.map((item) => alone(item).catch(asError))).then(settle);
    };
    const deadline: Deadline = { at: now() + FALLBACK_AFTER, expire: fallBack };
    fallbacks.watch(deadline);
    extendManyOn(client, group).then(settle, (error: unknown) => {
      // Refused for where its keys are: one lease a call. Else (a node down) each lease has the
      // error, unless the fallback is already under way: it answers.
      if (isSlotRefusal(error)) fallBack();
      else if (!fell) settle(group.map(() => asError(error)));
    });
  });
}
