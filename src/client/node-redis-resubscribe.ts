/**
 * A node-redis cluster client resubscribes the channels of a node it dropped (a failover, a slot
 * rediscovery) from a listener of its own internal event, and does not wait for those calls: when
 * its slot map has no master yet for a channel's slot (in the middle of a failover), the call
 * rejects, nobody can catch it, and the process gets an unhandled rejection (which ends a Node
 * process by default). On the Cluster subscriber latchkey owns, that listener is replaced by one
 * that makes the same calls and catches them: a channel left unsubscribed is found by the inbox's
 * topology check (see followTopology) and subscribed again.
 */

/** node-redis's internal event (`RESUBSCRIBE_LISTENERS_EVENT` in its cluster-slots module, 5 and 6). */
export const RESUBSCRIBE_EVENT = '__resubscribeListeners';

/** A channel's listeners, as node-redis hands them to its resubscribe listener. */
interface ChannelListeners {
  readonly strings: Iterable<(...args: never[]) => void>;
  readonly buffers: Iterable<(...args: never[]) => void>;
}

/** What node-redis emits: the listeners of the dropped node's subscriptions, by kind. */
interface DroppedListeners {
  readonly CHANNELS?: Iterable<[string, ChannelListeners]>;
  readonly PATTERNS?: Iterable<[string, ChannelListeners]>;
  readonly SHARDED?: Iterable<[string, ChannelListeners]>;
}

type Subscribe = (channel: string, listener: (...args: never[]) => void, bufferMode?: boolean) => Promise<unknown>;

/** The parts of a node-redis cluster client this needs. */
export interface ResubscribingCluster {
  listeners?(event: string): unknown[];
  removeListener?(event: string, listener: (...args: never[]) => void): unknown;
  on(event: string, listener: (...args: never[]) => void): unknown;
  subscribe: Subscribe;
  pSubscribe?: Subscribe;
  sSubscribe: Subscribe;
}

/**
 * Replaces `cluster`'s own resubscribe listener with one whose calls cannot reject unhandled
 * (see the module's comment). Does nothing unless the client has exactly one listener for the
 * event (a node-redis whose internals are not the ones known here is left as it is). Returns
 * whether it did.
 */
export function catchResubscribes(cluster: ResubscribingCluster): boolean {
  const own = cluster.listeners?.(RESUBSCRIBE_EVENT);
  if (own?.length !== 1 || !cluster.removeListener) return false;
  const original = own[0] as (...args: never[]) => void;
  const replacement = ((dropped: DroppedListeners) => {
    const again = (entries: Iterable<[string, ChannelListeners]> | undefined, subscribe: Subscribe | undefined): void => {
      if (!entries || !subscribe) return;
      for (const [channel, { strings, buffers }] of entries) {
        for (const listener of buffers) subscribe.call(cluster, channel, listener, true).catch(() => {});
        for (const listener of strings) subscribe.call(cluster, channel, listener).catch(() => {});
      }
    };
    again(dropped.CHANNELS, cluster.subscribe);
    again(dropped.PATTERNS, cluster.pSubscribe);
    again(dropped.SHARDED, cluster.sSubscribe);
  }) as (...args: never[]) => void;
  // Added before the original is removed: the event never has no listener in between. (On an
  // object that node-redis wraps around the client, the way Node's EventEmitter removes an
  // event's last listener would give the wrapper a listener table of its own, which node-redis's
  // internal emit never reads.)
  cluster.on(RESUBSCRIBE_EVENT, replacement);
  cluster.removeListener(RESUBSCRIBE_EVENT, original);
  const now = cluster.listeners?.(RESUBSCRIBE_EVENT);
  return now?.length === 1 && now[0] === replacement;
}
