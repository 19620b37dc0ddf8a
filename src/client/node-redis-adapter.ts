import { now } from '../clock.js';
import { connectionErrors, type ConnectionErrors } from './connection-errors.js';
import { catchResubscribes, type ResubscribingCluster } from './node-redis-resubscribe.js';
import { hasMethods, quitOrForce, readConnectionId, scanAll, unlessAborted, type ScriptClient, type SubscriberConnection } from './script-client.js';

interface ScriptOptions {
  keys: string[];
  arguments: string[];
}

/** The parts of a node-redis client (5 or 6) latchkey uses. */
export interface NodeRedisLike {
  evalSha(sha: string, options: ScriptOptions): Promise<unknown>;
  eval(source: string, options: ScriptOptions): Promise<unknown>;
  sendCommand(...args: never[]): unknown;
  duplicate(...args: never[]): NodeRedisLike;
  connect(): Promise<unknown>;
  close?(): Promise<unknown>;
  quit?(): Promise<unknown>;
  destroy?(): void;
  isOpen?: boolean;
  on(event: string, listener: (...args: never[]) => void): unknown;
  removeListener?(event: string, listener: (...args: never[]) => void): unknown;
  listenerCount?(event: string): number;
  subscribe(channel: string, listener: (message: string, channel: string) => void): Promise<unknown>;
  unsubscribe(channel: string): Promise<unknown>;
  sSubscribe(channel: string, listener: (message: string, channel: string) => void): Promise<unknown>;
  sUnsubscribe(channel: string): Promise<unknown>;
  /** Only on a cluster client (`createCluster`). */
  getSlotMaster?: unknown;
  /** Only on a cluster client: its masters, and a client for one of them. */
  masters?: unknown[];
  nodeClient?(node: unknown): Promise<NodeRedisLike> | NodeRedisLike;
}

/** A node-redis cluster client's slot map (`_slots`, not part of its typed API): how latchkey has it read the topology again. */
interface NodeRedisSlots {
  rediscover?(startWith?: unknown): Promise<unknown>;
  masters?: Array<{ client?: unknown }>;
}

/**
 * The events of a node-redis cluster client after which its sharded subscriptions may have
 * moved: a node client that became ready (node-redis makes one for a shard's new master when it
 * moves a subscription there) or went away (a node dropped from the slot map after a failover).
 */
const TOPOLOGY_EVENTS = ['node-ready', 'node-disconnect', 'sharded-channel-moved-error'] as const;

/** The least time between two rediscoveries a Cluster subscriber asks node-redis for, ms (see refreshTopology). */
const REDISCOVER_MS = 1000;

export function isNodeRedis(client: unknown): client is NodeRedisLike {
  return hasMethods(client, 'evalSha', 'sendCommand', 'duplicate');
}

async function closeClient(client: NodeRedisLike): Promise<void> {
  const quit = async (): Promise<unknown> =>
    typeof client.close === 'function' ? client.close() : typeof client.quit === 'function' ? client.quit() : undefined;
  await quitOrForce(quit, () => client.destroy?.());
}

export function nodeRedisAdapter(client: NodeRedisLike, owned: boolean): ScriptClient {
  const cluster = typeof client.getSlotMaster === 'function';
  // A node-redis client always has an 'error' listener of its user's (an unhandled one would crash the process).
  const errors = connectionErrors(client, owned);
  /**
   * A raw command on the client (called as its method). A Cluster's sendCommand takes the key
   * that routes it and whether it only reads first: none (any node) and false.
   */
  const send = cluster
    ? (args: string[]): Promise<unknown> => (client.sendCommand as (key: undefined, readonly: boolean, args: string[]) => Promise<unknown>)(undefined, false, args)
    : (args: string[]): Promise<unknown> => (client.sendCommand as (args: string[]) => Promise<unknown>)(args);
  return {
    driver: 'node-redis',
    cluster,
    evalsha: (sha, keys, args) => client.evalSha(sha, { keys: [...keys], arguments: [...args] }),
    eval: (source, keys, args) => client.eval(source, { keys: [...keys], arguments: [...args] }),
    waitReplicas: async (replicas, timeout) => Number(await send(['WAIT', String(replicas), String(timeout)])),
    ...(cluster ? {} : { scriptLoad: (source: string) => send(['SCRIPT', 'LOAD', source]) }),
    configGet: (parameter) => send(['CONFIG', 'GET', parameter]),
    connectionId: () => readConnectionId(send),
    scan: async (match) => {
      const nodes = cluster && client.masters && client.nodeClient ? await Promise.all(client.masters.map((m) => client.nodeClient!(m))) : [client];
      const pages = await Promise.all(
        nodes.map((node) =>
          scanAll((cursor) => (node.sendCommand as (args: string[]) => Promise<unknown>)(['SCAN', cursor, 'MATCH', match, 'COUNT', '1000'])),
        ),
      );
      return pages.flat();
    },
    createSubscriber: async (signal) => nodeRedisSubscriber(client.duplicate(), cluster, errors, signal),
    lastError: errors.last,
    close: async () => {
      errors.detach();
      if (owned) await closeClient(client);
    },
  };
}

async function nodeRedisSubscriber(sub: NodeRedisLike, cluster: boolean, errors: ConnectionErrors, signal: AbortSignal | undefined): Promise<SubscriberConnection> {
  // A connection we own: an unhandled 'error' event would crash the process.
  sub.on('error', () => {});
  const unwatch = errors.watch(sub);
  let connectedOnce = false;
  const reconnectListeners: Array<() => void> = [];
  const messageListeners: Array<(channel: string, message: string) => void> = [];
  const channels = new Set<string>();
  let rediscovering = false;
  let lastRediscovery = -Infinity;
  // Its own resubscribes after a node was dropped must not reject unhandled (node-redis-resubscribe.ts).
  if (cluster) catchResubscribes(sub as unknown as ResubscribingCluster);
  sub.on(cluster ? 'node-ready' : 'ready', () => {
    if (!connectedOnce) return;
    for (const l of reconnectListeners) l();
    // node-redis 5 does not move sharded subscriptions to a shard's new master after a failover
    // (redis/node-redis#3311): subscribe again whenever a node (re)connects.
    if (cluster) for (const channel of channels) sub.sSubscribe(channel, onMessage).catch(() => {});
  });
  // Its connect() waits as long as the reconnect strategy retries (forever, by default): a close
  // of the manager meanwhile destroys it, which stops the retries.
  try {
    await unlessAborted(sub.connect(), signal, () => {
      try {
        sub.destroy?.();
      } catch {
        // Not open (its connect failed meanwhile): nothing to stop.
      }
    });
  } catch (error) {
    unwatch();
    throw error;
  }
  connectedOnce = true;
  const onMessage = (message: string, channel: string): void => {
    for (const l of messageListeners) l(channel, message);
  };
  return {
    subscribe: async (channel) => {
      if (!cluster) return void (await sub.subscribe(channel, onMessage));
      channels.add(channel);
      await sub.sSubscribe(channel, onMessage);
    },
    unsubscribe: async (channel) => {
      if (!cluster) return void (await sub.unsubscribe(channel));
      channels.delete(channel);
      await sub.sUnsubscribe(channel);
    },
    onMessage: (listener) => {
      messageListeners.push(listener);
    },
    onReconnect: (listener) => {
      reconnectListeners.push(listener);
    },
    // 'terminated': its reconnectStrategy gave up (node-redis 6); 'end': it was closed.
    onEnd: (listener) => {
      sub.on('terminated', listener);
      sub.on('end', listener);
    },
    ...(cluster
      ? {
          onTopologyChange: (listener: () => void) => {
            for (const event of TOPOLOGY_EVENTS) sub.on(event, listener);
          },
          refreshTopology: () => {
            // One rediscovery at a time, at most one a second: each one reads the slots again and
            // has node-redis resubscribe the channels of every node it drops (calls that may
            // reject mid-failover: caught by catchResubscribes, and retried by the topology check).
            if (rediscovering || now() - lastRediscovery < REDISCOVER_MS) return;
            lastRediscovery = now();
            // node-redis 5's rediscover reads the slots from the client it is given; 6's from any.
            const slots = (sub as unknown as { _slots?: NodeRedisSlots })._slots;
            const call = slots?.rediscover?.(slots.masters?.find((m) => m.client)?.client);
            if (!call) return;
            rediscovering = true;
            call.catch(() => {}).finally(() => (rediscovering = false));
          },
          // node-redis sends SSUBSCRIBE only for a channel its node client has no listener for:
          // one that Redis dropped, or that sits on a demoted master, is left first.
          resubscribe: async (channel: string) => {
            if (!channels.has(channel)) return;
            await sub.sUnsubscribe(channel).catch(() => {});
            if (channels.has(channel)) await sub.sSubscribe(channel, onMessage);
          },
          scripts: {
            evalsha: (sha: string, keys: readonly string[], args: readonly string[]) => sub.evalSha(sha, { keys: [...keys], arguments: [...args] }),
            eval: (source: string, keys: readonly string[], args: readonly string[]) => sub.eval(source, { keys: [...keys], arguments: [...args] }),
          },
        }
      : {}),
    close: () => {
      unwatch();
      return closeClient(sub);
    },
  };
}
