/**
 * Batched renewals on a Redis Cluster client: a script's keys must share a slot, so the leases are
 * grouped by their lock key's slot and each group is one extend-many.lua call (at most
 * {@link MAX_BATCH} leases), the calls pipelined to their masters by the client. Lock names are
 * their keys' hash tags, so leases share a slot by chance: a handful among 16,384 slots, many at
 * 100,000 leases (about 6 each), where the calls a round fall from one per lease to one per slot.
 *
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
import type { ExtendItem, ExtendManyReply, OwnershipReply } from './backend.js';
import { FALLBACK_AFTER } from './cluster-migration.js';
import { extendManyOn } from './extend-many.js';

/** The groups' fallback deadlines, on one timer. */
const fallbacks = new Deadlines();

const asError = (error: unknown): Error => (error instanceof Error ? error : new Error(String(error)));

/**
 * Renews `items` on a Cluster client, one extend-many.lua call per slot (see above); `alone`
 * extends one lease by itself (Backend.extend). Resolves to one reply per item, in order; a group
 * that failed gives each of its leases the error (each is retried by the watchdog's rules).
 */
export async function extendManyBySlot(client: ScriptClient, items: readonly ExtendItem[], alone: (item: ExtendItem) => Promise<OwnershipReply>): Promise<ExtendManyReply> {
  const groups = new Map<number, number[]>();
  items.forEach((item, i) => {
    const slot = slotOf(item.keys.lock);
    const group = groups.get(slot);
    if (group) group.push(i);
    else groups.set(slot, [i]);
  });
  const replies = new Array<OwnershipReply | Error>(items.length);
  await Promise.all(
    [...groups.values()].map((indices) =>
      groupOrAlone(client, indices.map((i) => items[i]!), alone).then((got) => indices.forEach((i, j) => (replies[i] = got[j]!))),
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
