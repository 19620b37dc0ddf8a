/**
 * What latchkey's GLIDE cluster subscriber learns of its sharded subscriptions. GLIDE (2.5)
 * announces no reconnect and no topology change; it keeps, in its core, the subscriptions the
 * client asked for ("desired") and those the servers confirmed ("actual"), and
 * `getSubscriptions()` reads both without a round trip to any server. When a node gives up a
 * channel's slot (a failover demotes it, a reshard moves the slot) it sends a `sunsubscribe`
 * push and GLIDE drops the channel from "actual"; its reconciliation subscribes it again a few
 * seconds later, but on the node its slot map names then, which after a failover is still the
 * demoted master (a replica now, where SPUBLISH on the new master does not count it).
 */

/** GLIDE's `GlideClusterClientConfiguration.PubSubChannelModes.Sharded`. */
const SHARDED = 2;

/** How often latchkey's GLIDE cluster subscriber compares its channels with GLIDE's "actual" subscriptions, ms, while it has some. */
export const GLIDE_WATCH_MS = 50;

/** What the watch needs of a GLIDE cluster client (2.5 and later). */
export interface SubscriptionsReader {
  getSubscriptions(): Promise<{ actualSubscriptions: Partial<Record<number, Iterable<unknown>>> }>;
}

export function readsSubscriptions(client: object): client is SubscriptionsReader {
  return typeof (client as Partial<SubscriptionsReader>).getSubscriptions === 'function';
}

/**
 * Calls `changed` whenever the set of `held` channels missing from GLIDE's actual subscriptions
 * changes: when GLIDE loses one (a node gave up the slot, or its connection dropped) and when
 * GLIDE subscribes it again on its own (perhaps on a demoted master); `regained` is true when a
 * channel found missing is back (a message published in between was lost). Reads GLIDE's state
 * every `everyMs` while `held` is not empty; `wake()` restarts the reads after a channel is held.
 */
export function watchSubscriptions(
  client: SubscriptionsReader,
  held: () => ReadonlySet<string>,
  changed: (regained: boolean) => void,
  text: (value: unknown) => string,
  everyMs = GLIDE_WATCH_MS,
): { wake(): void; close(): void } {
  let timer: NodeJS.Timeout | undefined;
  let reading = false;
  let closed = false;
  /** The channels found missing at the last read. */
  let missing = new Set<string>();

  const schedule = (): void => {
    if (closed || timer || reading || held().size === 0) return;
    timer = setTimeout(() => {
      timer = undefined;
      void read();
    }, everyMs);
    timer.unref();
  };

  async function read(): Promise<void> {
    reading = true;
    try {
      const channels = held();
      const state = await client.getSubscriptions();
      const actual = new Set<string>();
      for (const channel of state.actualSubscriptions[SHARDED] ?? []) actual.add(text(channel));
      const now = new Set([...channels].filter((c) => !actual.has(c)));
      const regained = [...missing].some((c) => !now.has(c) && channels.has(c));
      const lost = [...now].some((c) => !missing.has(c));
      missing = now;
      if ((lost || regained) && !closed) changed(regained);
    } catch {
      // A closed client, or GLIDE busy reconnecting: the next read (or the inbox's audit) sees it.
    } finally {
      reading = false;
      schedule();
    }
  }

  return {
    wake: schedule,
    close() {
      closed = true;
      clearTimeout(timer);
      timer = undefined;
    },
  };
}
