import { unlessAborted, type ScriptClient, type SubscriberConnection } from '../client/script-client.js';
import { BackendError, ClosedError } from '../errors.js';
import type { LockKeys } from '../keys.js';
import { runScript } from '../lua/run-script.js';
import { inboxListenersScript } from '../lua/scripts.generated.js';
import { managerInbox, parseGrant, type Inbox } from './backend.js';
import { followTopology, type FollowedChannel } from './inbox-topology.js';

type GrantListener = (member?: string, fence?: number) => void;

/** The channel a release publishes a grant on, given the channel prefix the script is passed. */
export function lockInboxPrefix(keys: LockKeys): string {
  return `${keys.lock}:inbox:`;
}

/**
 * The manager's subscriber connection. `asWakeUp`: a grant only wakes its waiter, which then
 * looks for itself (see {@link openLockInbox}); otherwise the waiter takes the lock from the message.
 */
async function subscriber(
  client: ScriptClient,
  listener: GrantListener,
  accept: (channel: string) => boolean,
  asWakeUp: boolean,
  signal: AbortSignal | undefined,
): Promise<SubscriberConnection> {
  let connection: SubscriberConnection | undefined;
  try {
    connection = await client.createSubscriber(signal);
    // Made after the manager was closed (a client that connects without being told): closed again.
    signal?.throwIfAborted();
    connection.onMessage((from, message) => {
      const grant = accept(from) ? parseGrant(message) : undefined;
      if (grant) listener(grant.member, asWakeUp ? 0 : grant.fence);
    });
    // Messages published while the connection was down are lost: every waiter looks again.
    connection.onReconnect(() => listener());
    return connection;
  } catch (error) {
    await connection?.close().catch(() => {});
    throw subscribeError(error);
  }
}

/**
 * Whether an inbox's connection ended for good: one whose retry strategy gave up hears nothing
 * more, so the inbox says so (the next join opens another, and its waiters join that one) and
 * `onEnd` runs once (every waiter looks again at once rather than at its recheck). An end that
 * `close()` caused is not one.
 */
function watchEnd(connection: SubscriberConnection, onEnd: () => void): { ended: () => boolean; close: () => Promise<void> } {
  let ended = false;
  let closing = false;
  connection.onEnd?.(() => {
    if (ended || closing) return;
    ended = true;
    onEnd();
  });
  return {
    ended: () => ended,
    close: () => {
      closing = true;
      return connection.close();
    },
  };
}

function subscribeError(error: unknown): BackendError {
  return new BackendError('subscribe', error instanceof Error ? error.message : String(error), { cause: error });
}

/**
 * A manager's inbox on one Redis: one subscriber connection (a duplicate of the user's client,
 * made on first use) listening on one channel, whatever the number of locks the process waits
 * for. A release that grants a lock to one of the manager's waiters publishes `"<waiter> <fence>"`
 * there, so only that waiter wakes, and it needs no round trip to learn it holds the lock.
 * `signal` (the backend's close) ends an opening still under way: its connection is closed.
 */
export async function openInbox(client: ScriptClient, channel: string, listener: GrantListener, signal?: AbortSignal): Promise<Inbox> {
  const connection = await subscriber(client, listener, (from) => from === channel, false, signal);
  try {
    // A client that queues commands until it connects (ioredis with `maxRetriesPerRequest: null`)
    // would hold this SUBSCRIBE as long as Redis refuses the connection.
    await unlessAborted(connection.subscribe(channel), signal);
  } catch (error) {
    await connection.close().catch(() => {});
    throw subscribeError(error);
  }
  const end = watchEnd(connection, listener);
  return managerInbox(() => end.close(), end.ended);
}

/**
 * A manager's inbox on Redis Cluster: one sharded channel per lock, `<lock key>:inbox:<manager>`,
 * in the lock's slot, so the release script may SPUBLISH to it on the lock's master (a classic
 * PUBLISH from a script counts only the listeners connected to the node that ran it). The
 * manager joins a lock's channel while it has a waiter queued for it.
 *
 * A grant heard here only wakes its waiter, which then sends its own attempt: acquire.lua answers
 * the granted fence when the lock holds the waiter's token, and otherwise takes the lock or
 * queues again. SPUBLISH counts the subscribers on the master only, but the message also reaches
 * those on the shard's replicas. A sharded subscriber can be on a replica: ioredis 6 keeps its
 * subscription on a master demoted by a failover until its subscriber client refreshes its slots,
 * for seconds. The release then finds nobody listening, passes the waiter over (frees the lock, or
 * grants it to the next waiter), and the waiter still gets the message: taking the lock from it
 * would hold a lease that Redis does not have (test: "keeps renewed leases and serves waiters
 * across a failover of one master", which failed 11 runs in 25 on ioredis 6). The cost
 * is one round trip per grant on Cluster.
 *
 * The subscriptions follow the topology (see followTopology): on each topology event the client
 * reports (a slot refresh, a node that connected or left, a reconnect) and every `auditMs`, each
 * channel is probed on its slot's master (inbox-listeners.lua counts what SPUBLISH would). A
 * channel found without a listener there stops reporting itself listening, is subscribed again
 * until the probe finds it, and then every waiter looks again at once: a release in the gap
 * passed them over (release.lua keeps a waiter it finds unheard for the first time) and its
 * message was lost.
 */
export async function openLockInbox(client: ScriptClient, managerId: string, listener: GrantListener, auditMs?: number, signal?: AbortSignal): Promise<Inbox> {
  const suffix = `:inbox:${managerId}`;
  const connection = await subscriber(client, listener, (from) => from.endsWith(suffix), true, signal);
  /**
   * Per channel: how many waiters joined, and the subscription (resolved once listening). An
   * entry whose count fell to 0 is unsubscribed once its subscribe completed, unless a join
   * revived it first; the entry is removed in the same step that sends the unsubscribe, so a
   * later join's subscribe goes out after it (one connection runs its commands in order).
   * `ready` is false from the moment a probe finds the subscription gone from the channel's
   * master until it is back there (see followTopology); joins meanwhile wait for it.
   */
  const channels = new Map<string, LockChannel>();
  const channelOf = (keys: LockKeys): string => lockInboxPrefix(keys) + managerId;
  const prober = connection.scripts ? ({ ...client, ...connection.scripts } as ScriptClient) : client;
  const topology = followTopology(
    {
      channels: () => channels.entries(),
      // On the subscriber's own client when it has one (see SubscriberConnection.scripts).
      probe: async (keys, channel) => Number(await runScript(prober, inboxListenersScript, [keys.lock], [channel])),
      resubscribe: async (channel) => {
        const entry = channels.get(channel);
        if (entry && entry.count > 0) await (connection.resubscribe ? connection.resubscribe(channel) : connection.subscribe(channel));
      },
      refresh: () => connection.refreshTopology?.(),
      recovered: () => listener(), // every waiter looks again: a grant or wake-up may have been published in the gap
    },
    auditMs,
  );
  connection.onTopologyChange?.(() => topology.check());
  connection.onReconnect(() => topology.check());
  const end = watchEnd(connection, () => {
    topology.close();
    listener();
  });
  return {
    listening: (keys) => {
      const entry = channels.get(channelOf(keys));
      return !end.ended() && entry !== undefined && entry.ready && entry.count > 0;
    },
    ended: end.ended,
    join(keys) {
      const channel = channelOf(keys);
      const existing = channels.get(channel);
      topology.arm();
      if (existing) {
        existing.count++; // also revives an entry on its way out
        return existing.ready || !existing.subscribed ? existing.subscription : existing.whenReady();
      }
      const entry = lockChannel(keys);
      entry.subscription = connection.subscribe(channel).then(
        () => {
          entry.subscribed = true;
          entry.ready = true;
          entry.readied();
        },
        (error: unknown) => {
          if (channels.get(channel) === entry) channels.delete(channel);
          throw subscribeError(error);
        },
      );
      channels.set(channel, entry);
      return entry.subscription;
    },
    leave(keys) {
      const channel = channelOf(keys);
      const entry = channels.get(channel);
      if (!entry || --entry.count > 0) return;
      if (![...channels.values()].some((e) => e.count > 0)) topology.disarm();
      entry.subscription
        .then(() => {
          if (entry.count > 0 || channels.get(channel) !== entry) return; // joined again meanwhile
          channels.delete(channel);
          return connection.unsubscribe(channel);
        })
        .catch(() => {});
    },
    close: () => {
      topology.close();
      return end.close();
    },
  };
}

/** A lock's inbox channel on Cluster (see openLockInbox). */
interface LockChannel extends FollowedChannel {
  count: number;
  subscribed: boolean;
  subscription: Promise<void>;
  /** Resolves once the channel listens again (at once when it does now). */
  whenReady(): Promise<void>;
  /** Resolves the joins that wait for it to listen again. */
  readied(): void;
}

function lockChannel(keys: LockKeys): LockChannel {
  let waiting: Array<() => void> = [];
  return {
    keys,
    count: 1,
    subscribed: false,
    ready: false,
    subscription: Promise.resolve(),
    whenReady() {
      return this.ready ? Promise.resolve() : new Promise<void>((resolve) => waiting.push(resolve));
    },
    readied() {
      const resolved = waiting;
      waiting = [];
      for (const resolve of resolved) resolve();
    },
  };
}

/**
 * The inboxes a backend opens, so that its close() closes those still open and ends those still
 * opening: `open(opening)` hands `opening` the signal that `closeAll()` aborts (a subscriber that
 * cannot connect is given up), and an inbox that opens after the close is closed at once (the call
 * rejects with a ClosedError). An inbox's close also forgets it, and runs once whoever asks first.
 */
export function trackInboxes(): { open(opening: (signal: AbortSignal) => Promise<Inbox>): Promise<Inbox>; closeAll(): Promise<void> } {
  const opened = new Set<() => Promise<void>>();
  const closing = new AbortController();
  const track = (inbox: Inbox): Inbox => {
    let closed: Promise<void> | undefined;
    const close = (): Promise<void> => (closed ??= inbox.close());
    opened.add(close);
    return {
      ...inbox,
      close: async () => {
        opened.delete(close);
        await close();
      },
    };
  };
  return {
    async open(opening) {
      const { signal } = closing;
      const inbox = track(await opening(signal));
      if (!signal.aborted) return inbox;
      await inbox.close().catch(() => {});
      throw signal.reason;
    },
    async closeAll() {
      closing.abort(new ClosedError());
      await Promise.all([...opened].map((close) => close().catch(() => {})));
      opened.clear();
    },
  };
}
