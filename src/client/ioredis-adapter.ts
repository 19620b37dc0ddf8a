import { coalesceWrites, type CorkableStream } from './coalesce-writes.js';
import { connectionErrors, type ConnectionErrors } from './connection-errors.js';
import { scriptSender } from './ioredis-commands.js';
import { escapeGlob } from '../keys.js';
import { hasMethods, quitOrForce, readConnectionId, scanAll, type ScriptClient, type SubscriberConnection } from './script-client.js';

/** The parts of an ioredis `Redis` client latchkey uses. */
export interface IoredisLike {
  /** Arrays among the arguments are flattened by the client (its `Command` does `args.flat()`). */
  evalsha(sha: string, numKeys: number, ...keysAndArgs: (string | readonly string[])[]): Promise<unknown>;
  eval(source: string, numKeys: number, ...keysAndArgs: (string | readonly string[])[]): Promise<unknown>;
  defineCommand(...args: never[]): unknown;
  call(command: string, ...args: string[]): Promise<unknown>;
  duplicate(...args: never[]): IoredisLike;
  quit(): Promise<unknown>;
  disconnect(): void;
  status?: string;
  /** The connection's socket (a `Redis` client's; a `Cluster` has none). */
  stream?: Partial<CorkableStream>;
  on(event: string, listener: (...args: never[]) => void): unknown;
  removeListener?(event: string, listener: (...args: never[]) => void): unknown;
  listenerCount?(event: string): number;
  subscribe(...channels: string[]): Promise<unknown>;
  unsubscribe(...channels: string[]): Promise<unknown>;
  ssubscribe(...channels: string[]): Promise<unknown>;
  sunsubscribe(...channels: string[]): Promise<unknown>;
  /** True on an ioredis `Cluster`. */
  isCluster?: boolean;
  /** On an ioredis `Cluster`: its node connections. */
  nodes?(role: 'master'): IoredisLike[];
  /** On an ioredis `Cluster`: reads the slots again (CLUSTER SLOTS from one node). */
  refreshSlotsCache?(callback?: (error?: Error | null) => void): void;
  /** Its options (a `Cluster`'s redirection settings: see {@link clusterLateSends}). */
  options?: object;
  /** Sends a built command (see ioredis-commands.ts). */
  sendCommand?(command: never): Promise<unknown>;
}

/** What one resend of an ioredis Cluster costs besides its delay: a round trip to a live node, generously, ms. */
const RESEND_TRIP = 50;

/**
 * How long an ioredis `Cluster` may still send a command after its `commandTimeout` failed it, ms.
 * The timeout rejects the command's promise, but a retry already in the Cluster's delay queue (after
 * TRYAGAIN, CLUSTERDOWN, a closed connection or a delayed MOVED) sends it again, and so on up to
 * `maxRedirections` times: at most that many retries, each after the longest of those delays
 * (ioredis 5 and 6 defaults: 16 × 100 ms).
 */
export function clusterLateSends(options: object | undefined): number {
  const o = (options ?? {}) as Record<string, unknown>;
  const num = (value: unknown, fallback: number): number => (typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : fallback);
  const delay = Math.max(num(o.retryDelayOnTryAgain, 100), num(o.retryDelayOnClusterDown, 100), num(o.retryDelayOnFailover, 100), num(o.retryDelayOnMoved, 0));
  return num(o.maxRedirections, 16) * (delay + RESEND_TRIP);
}

/**
 * The events of an ioredis `Cluster` with `shardedSubscribers` after which its sharded
 * subscriptions may have moved: `refresh` (it read the slots again: ioredis 6 does on a MOVED
 * reply to SSUBSCRIBE and on a `sunsubscribe` push, which Redis sends when a failover or a reshard
 * takes a channel's slot from a node), `+node`/`-node` (a node connection came or went),
 * `subscribersReady` (ioredis 6 moved its per-master subscribers after a topology change).
 */
const TOPOLOGY_EVENTS = ['refresh', '+node', '-node', 'subscribersReady'] as const;

/** The `keyPrefix` ioredis puts before every key the client sends ('' when none). */
function keyPrefixOf(client: IoredisLike): string {
  const prefix = (client.options as { keyPrefix?: unknown } | undefined)?.keyPrefix;
  return typeof prefix === 'string' ? prefix : '';
}

export function isIoredis(client: unknown): client is IoredisLike {
  return hasMethods(client, 'evalsha', 'defineCommand', 'duplicate');
}

export function ioredisAdapter(client: IoredisLike, owned: boolean): ScriptClient {
  const cluster = client.isCluster === true;
  const errors = connectionErrors(client, owned);
  // A Cluster routes each command to a node's own connection: its writes are not coalesced.
  const coalesce = cluster
    ? () => {}
    : coalesceWrites(() => {
        const s = client.stream;
        return client.status === 'ready' && typeof s?.cork === 'function' && typeof s.uncork === 'function' ? (s as CorkableStream) : undefined;
      });
  const send = scriptSender(client);
  return {
    driver: 'ioredis',
    cluster,
    // One Redis: a command that timed out still runs ahead of those sent after it (one connection,
    // in order, also when ioredis re-sends its unanswered commands after a reconnect).
    lateSends: cluster ? clusterLateSends(client.options) : 0,
    // The command is built with its flat argument list (ioredis-commands.ts), or the keys and
    // arguments go as the arrays they are (ioredis flattens them). The client never writes to
    // them, so a Redlock passes the same arrays to every node.
    evalsha: (sha, keys, args) => {
      coalesce();
      return send ? send('evalsha', sha, keys, args) : client.evalsha(sha, keys.length, keys, args);
    },
    eval: (source, keys, args) => {
      coalesce();
      return send ? send('eval', source, keys, args) : client.eval(source, keys.length, keys, args);
    },
    waitReplicas: async (replicas, timeout) => Number(await client.call('WAIT', String(replicas), String(timeout))),
    ...(cluster ? {} : { scriptLoad: (source: string) => client.call('SCRIPT', 'LOAD', source) }),
    configGet: (parameter) => client.call('CONFIG', 'GET', parameter),
    connectionId: () => readConnectionId((args) => client.call(args[0]!, ...args.slice(1))),
    // On a Cluster, sharded subscriptions need `shardedSubscribers` (without it SSUBSCRIBE goes to
    // one random node and hangs (ioredis 5) or fails (6) for channels of other shards); the duplicate gets it.
    // A `keyPrefix` prefixes the keys of every command but SCAN's pattern: it is added to the
    // pattern here and taken off the keys found, which are then as the scripts name them.
    scan: async (match) => {
      const nodes = cluster && client.nodes ? client.nodes('master') : [client];
      const prefix = keyPrefixOf(client);
      const pattern = escapeGlob(prefix) + match;
      const pages = await Promise.all(nodes.map((node) => scanAll((cursor) => node.call('SCAN', cursor, 'MATCH', pattern, 'COUNT', '1000'))));
      return pages.flat().map((key) => key.slice(prefix.length));
    },
    // The subscriber queues its commands until it is connected whatever the client's
    // `enableOfflineQueue` (its SUBSCRIBE is sent the moment it is made, while it connects).
    // A Cluster's sharded subscriber takes no `keyPrefix`: ioredis counts SSUBSCRIBE's channel
    // as a key and would prefix it, where releases publish to the channel as latchkey names it.
    createSubscriber: async () =>
      cluster
        ? ioredisSubscriber(
            (client.duplicate as (nodes?: unknown, options?: object) => IoredisLike)(undefined, {
              shardedSubscribers: true,
              enableOfflineQueue: true,
              keyPrefix: '',
              redisOptions: { ...((client.options as { redisOptions?: object } | undefined)?.redisOptions ?? {}), keyPrefix: '' },
            }),
            true,
            errors,
          )
        : // Without autoResubscribe: see ioredisSubscriber.
          ioredisSubscriber((client.duplicate as (override?: object) => IoredisLike)({ autoResubscribe: false, enableOfflineQueue: true }), false, errors),
    lastError: errors.last,
    close: async () => {
      errors.detach();
      if (owned) await quitOrForce(() => client.quit(), () => client.disconnect());
    },
  };
}

/**
 * The subscriber connection latchkey owns. On one Redis (or Sentinel) it is made without ioredis's
 * `autoResubscribe`: after a reconnect, ioredis subscribes the channels again from its ready
 * handler and leaves the call's promise unhandled, so a connection that ends for good before the
 * reply (its retryStrategy gives up, or it is closed) ends in an unhandled rejection ("Connection
 * is closed.", seen in CI during a Sentinel failover). latchkey subscribes its channels again
 * itself, catches the call, and tells its reconnect listeners (every waiter looks again) once the
 * call settled: a release after their look is heard. A Cluster's sharded subscribers resubscribe
 * with their rejections caught (ioredis's ClusterSubscriberGroup); the inbox also follows them.
 */
async function ioredisSubscriber(sub: IoredisLike, sharded: boolean, errors: ConnectionErrors): Promise<SubscriberConnection> {
  // A subscriber we own: its errors are reported through reconnects and as an UnreachableError's
  // cause, never as an unhandled 'error' event.
  sub.on('error', () => {});
  const unwatch = errors.watch(sub);
  let connectedOnce = false;
  const reconnectListeners: Array<() => void> = [];
  /** The channels subscribed (not sharded), to subscribe again after a reconnect. */
  const channels = new Set<string>();
  const reconnected = (): void => {
    for (const l of reconnectListeners) l();
  };
  sub.on('ready', () => {
    if (!connectedOnce) {
      connectedOnce = true;
      return;
    }
    if (sharded || channels.size === 0) return reconnected();
    sub.subscribe(...channels).then(reconnected, reconnected);
  });
  return {
    subscribe: async (channel) => {
      if (!sharded) channels.add(channel);
      await (sharded ? sub.ssubscribe(channel) : sub.subscribe(channel));
    },
    unsubscribe: async (channel) => {
      if (!sharded) channels.delete(channel);
      await (sharded ? sub.sunsubscribe(channel) : sub.unsubscribe(channel));
    },
    onMessage: (listener) => {
      sub.on(sharded ? 'smessage' : 'message', ((channel: string, message: string) => listener(channel, message)) as (...args: never[]) => void);
    },
    onReconnect: (listener) => {
      reconnectListeners.push(listener);
    },
    // ioredis emits 'end' once it will not reconnect (its retryStrategy returned no delay).
    onEnd: (listener) => {
      sub.on('end', listener);
    },
    ...(sharded
      ? {
          onTopologyChange: (listener: () => void) => {
            for (const event of TOPOLOGY_EVENTS) sub.on(event, listener);
          },
          refreshTopology: () => sub.refreshSlotsCache?.(() => {}),
          // ioredis routes SSUBSCRIBE by its current slot map (to the master's subscriber, which
          // Redis may have dropped the channel on): sent again as is.
          resubscribe: async (channel: string) => {
            await sub.ssubscribe(channel);
          },
          scripts: {
            evalsha: (sha: string, keys: readonly string[], args: readonly string[]) => sub.evalsha(sha, keys.length, keys, args),
            eval: (source: string, keys: readonly string[], args: readonly string[]) => sub.eval(source, keys.length, keys, args),
          },
        }
      : {}),
    close: () => {
      unwatch();
      return quitOrForce(() => sub.quit(), () => sub.disconnect());
    },
  };
}
