import { UnsupportedError } from '../errors.js';
import { readsSubscriptions, watchSubscriptions } from './glide-subscriptions.js';
import { hasMethods, QUIT_TIMEOUT, readConnectionId, scanAll, type ScriptClient, type SubscriberConnection } from './script-client.js';

/**
 * The parts of a Valkey GLIDE client (`GlideClient` or `GlideClusterClient` of
 * `@valkey/valkey-glide` 2.x) latchkey uses. GLIDE has no EVALSHA/EVAL methods of its own (its
 * `invokeScript` hides the cache behind a `Script` object that must be released): latchkey sends
 * them with `customCommand`, which a cluster client routes by the first key.
 */
export interface GlideLike {
  customCommand(args: string[]): Promise<unknown>;
  invokeScript(...args: never[]): unknown;
  close(errorMessage?: string): void;
  /** Only on a `GlideClusterClient`: sharded pub/sub. */
  ssubscribe?: unknown;
  /** On a `GlideClusterClient`: SCAN over every slot, with a `ClusterScanCursor`. */
  scan?: unknown;
}

/** What latchkey's subscriber connection needs of a GLIDE client it creates. */
interface GlideSubscriber {
  subscribe(channels: Iterable<string>, timeoutMs: number): Promise<void>;
  unsubscribe(channels: Iterable<string> | null, timeoutMs: number): Promise<void>;
  ssubscribe?(channels: Iterable<string>, timeoutMs: number): Promise<void>;
  sunsubscribe?(channels: Iterable<string> | null, timeoutMs: number): Promise<void>;
  customCommand(args: string[]): Promise<unknown>;
  close(): void;
}

/** `GlideClient` or `GlideClusterClient` itself (the user's client's constructor): its static factory. */
interface GlideClass {
  createClient(config: object): Promise<GlideSubscriber>;
}

/** GLIDE's cluster scan cursor (a native class of `@valkey/valkey-glide`). */
interface ClusterScanCursor {
  isFinished(): boolean;
}
type ClusterScan = (cursor: ClusterScanCursor, options: { match: string; count: number }) => Promise<[ClusterScanCursor, unknown[]]>;

interface PubSubMsg {
  message: unknown;
  channel: unknown;
}

/**
 * How long a `GlideClusterClient` may be taken to still send a command after its `requestTimeout`
 * failed it, ms. Its core retries a refused or redirected request (TRYAGAIN, MOVED) itself and
 * does not say when it stops: latchkey assumes the order of ioredis's retries (16 × 100 ms).
 */
export const GLIDE_CLUSTER_LATE_SENDS = 2400;

/** How long a SUBSCRIBE or UNSUBSCRIBE on latchkey's GLIDE subscriber may take before it rejects, ms. */
const SUBSCRIBE_TIMEOUT = 5000;

export function isGlide(client: unknown): client is GlideLike {
  return hasMethods(client, 'customCommand', 'invokeScript', 'close');
}

/** True for a `GlideClusterClient` (the only GLIDE client with sharded pub/sub). */
export function isGlideCluster(client: GlideLike): boolean {
  return typeof client.ssubscribe === 'function';
}

/** GLIDE decodes replies as strings by default; a client made with `defaultDecoder: Decoder.Bytes` gives Buffers. */
function decoded(reply: unknown): unknown {
  if (Buffer.isBuffer(reply)) return reply.toString();
  if (Array.isArray(reply)) return reply.map(decoded);
  return reply;
}

/**
 * GLIDE reports a missing script as `RequestError: "An error was signalled by the server: -
 * NoScriptError: …"`; the script runner looks for Redis's own `NOSCRIPT` prefix.
 */
function noScriptAsRedisSaysIt(error: unknown): never {
  if (error instanceof Error && /NoScriptError|NOSCRIPT/.test(error.message) && !error.message.startsWith('NOSCRIPT')) {
    throw new Error(`NOSCRIPT ${error.message}`, { cause: error });
  }
  throw error;
}

/**
 * Wraps a user's `GlideClient` or `GlideClusterClient`. It is borrowed: latchkey never closes it,
 * never subscribes on it (GLIDE delivers messages to the callback fixed in the client's
 * configuration, which is the user's), and opens its own subscriber connection for notified waiting.
 */
export function glideAdapter(client: GlideLike): ScriptClient {
  const cluster = isGlideCluster(client);
  const command = async (args: string[]): Promise<unknown> => decoded(await client.customCommand(args));
  return {
    driver: 'valkey-glide',
    cluster,
    lateSends: cluster ? GLIDE_CLUSTER_LATE_SENDS : 0,
    ...scriptsOn(command),
    waitReplicas: async (replicas, timeout) => Number(await command(['WAIT', String(replicas), String(timeout)])),
    // A cluster client would send these to any node, not the one a script went to: standalone only.
    ...(cluster
      ? {}
      : {
          configGet: async (parameter: string) => flatRecord(await command(['CONFIG', 'GET', parameter])),
          connectionId: () => readConnectionId(command),
          scriptLoad: (source: string) => command(['SCRIPT', 'LOAD', source]),
        }),
    scan: (match) => (cluster ? clusterScan(client, match) : scanAll((cursor) => command(['SCAN', cursor, 'MATCH', match, 'COUNT', '1000']))),
    createSubscriber: () => glideSubscriber(client, cluster),
    close: async () => {}, // never the user's client
  };
}

/** EVALSHA and EVAL sent with `customCommand` (a cluster client routes them by the first key). */
function scriptsOn(command: (args: string[]) => Promise<unknown>): Pick<ScriptClient, 'evalsha' | 'eval'> {
  return {
    evalsha: (sha, keys, args) => command(['EVALSHA', sha, String(keys.length), ...keys, ...args]).catch(noScriptAsRedisSaysIt),
    eval: (source, keys, args) => command(['EVAL', source, String(keys.length), ...keys, ...args]),
  };
}

/**
 * SCAN on every master of a cluster: GLIDE's cluster scan, which walks the slots rather than the
 * nodes. Its cursor class is loaded from the installed GLIDE package on first use (latchkey does
 * not depend on GLIDE; whoever passes a GlideClusterClient has it installed).
 */
async function clusterScan(client: GlideLike, match: string): Promise<string[]> {
  const specifier = '@valkey/valkey-glide';
  const glide = (await import(specifier)) as { ClusterScanCursor: new () => ClusterScanCursor };
  const scan = (client.scan as ClusterScan).bind(client);
  const keys = new Set<string>(); // the same key may come twice
  let cursor = new glide.ClusterScanCursor();
  while (!cursor.isFinished()) {
    const [next, page] = await scan(cursor, { match, count: 1000 });
    for (const key of page) keys.add(String(decoded(key)));
    cursor = next;
  }
  return [...keys];
}

/**
 * The connection settings of the user's client, for latchkey's subscriber: GLIDE has no
 * `duplicate()`, and a client's pub/sub callback is fixed when it is created. GLIDE 2.x keeps the
 * configuration the client was created with as its `config` property (not part of its typed API).
 */
function subscriberConfig(client: GlideLike, callback: (msg: PubSubMsg) => void): object {
  const config = (client as unknown as { config?: unknown }).config;
  if (typeof config !== 'object' || config === null || !Array.isArray((config as { addresses?: unknown }).addresses)) {
    throw new UnsupportedError(
      'Notified waiting through this GLIDE client',
      'latchkey could not read the connection settings (the `config` of @valkey/valkey-glide 2.x) to open its subscriber connection; use strategy: \'backoff\'',
    );
  }
  // Not the user's subscriptions, protocol (pub/sub needs RESP3, GLIDE's default) or client-side cache.
  const settings: Record<string, unknown> = { ...config };
  delete settings.protocol;
  delete settings.clientSideCache;
  settings.pubsubSubscriptions = { channelsAndPatterns: {}, callback };
  return settings;
}

async function glideSubscriber(client: GlideLike, cluster: boolean): Promise<SubscriberConnection> {
  const messageListeners: Array<(channel: string, message: string) => void> = [];
  const callback = (msg: PubSubMsg): void => {
    const channel = String(decoded(msg.channel));
    const message = String(decoded(msg.message));
    for (const l of messageListeners) l(channel, message);
  };
  const Client = client.constructor as Partial<GlideClass>;
  if (typeof Client.createClient !== 'function') {
    throw new UnsupportedError('Notified waiting through this GLIDE client', 'its class has no createClient(); use strategy: \'backoff\'');
  }
  const sub = await Client.createClient(subscriberConfig(client, callback));
  const onMessage = (listener: (channel: string, message: string) => void): void => {
    messageListeners.push(listener);
  };
  if (!cluster) {
    return {
      onMessage,
      // GLIDE resubscribes by itself after a reconnect and tells no one: on one server a grant
      // published meanwhile is found by the waiter's periodic re-check (`recheck`) instead.
      onReconnect: () => {},
      subscribe: (channel) => sub.subscribe([channel], SUBSCRIBE_TIMEOUT),
      unsubscribe: (channel) => sub.unsubscribe([channel], SUBSCRIBE_TIMEOUT),
      close: async () => {
        // Emptied first: GLIDE's subscription synchronizer otherwise keeps trying to restore the
        // channels of a closed client (logging an error each time) until the process exits.
        await sub.unsubscribe(null, QUIT_TIMEOUT).catch(() => {});
        sub.close();
      },
    };
  }
  return { onMessage, ...clusterSubscription(sub) };
}

/**
 * Sharded channels on latchkey's GLIDE cluster subscriber: dynamic SSUBSCRIBE (GLIDE 2.x), which
 * GLIDE sends to the shard of each channel's slot. GLIDE follows a moved slot on its own only
 * partly (see glide-subscriptions.ts): after a failover it subscribes again on the demoted master.
 * So the inbox is told when GLIDE's own state shows a channel lost or re-made
 * (`onTopologyChange`), probes on this client (a MOVED reply to the probe refreshes this client's
 * slot map), and resubscribes by leaving and joining the channel: GLIDE ignores an SSUBSCRIBE to a
 * channel it believes it has, and sends a fresh one to the node its slot map names now.
 */
function clusterSubscription(sub: GlideSubscriber): Omit<SubscriberConnection, 'onMessage'> {
  const join = (channel: string): Promise<void> => sub.ssubscribe!([channel], SUBSCRIBE_TIMEOUT);
  const leave = (channels: string[] | null, timeoutMs = SUBSCRIBE_TIMEOUT): Promise<void> => sub.sunsubscribe!(channels, timeoutMs);
  /** The channels latchkey's subscribes have confirmed and it has not left. */
  const held = new Set<string>();
  const topologyListeners: Array<() => void> = [];
  const reconnectListeners: Array<() => void> = [];
  const watch = readsSubscriptions(sub)
    ? watchSubscriptions(
        sub,
        () => held,
        (regained) => {
          // A channel GLIDE had lost is back, perhaps by GLIDE's own doing before latchkey's
          // probe saw it gone: a grant published meanwhile was lost, so every waiter looks again.
          if (regained) for (const l of reconnectListeners) l();
          for (const l of topologyListeners) l();
        },
        (channel) => String(decoded(channel)),
      )
    : undefined;
  return {
    subscribe: async (channel) => {
      await join(channel);
      held.add(channel);
      watch?.wake();
    },
    unsubscribe: (channel) => {
      held.delete(channel);
      return leave([channel]);
    },
    onReconnect: (listener) => {
      reconnectListeners.push(listener);
    },
    onTopologyChange: (listener) => {
      topologyListeners.push(listener);
    },
    resubscribe: async (channel) => {
      await leave([channel]);
      await join(channel);
    },
    scripts: scriptsOn(async (args) => decoded(await sub.customCommand(args))),
    close: async () => {
      watch?.close();
      held.clear();
      // Emptied first (see the standalone subscriber's close).
      await leave(null, QUIT_TIMEOUT).catch(() => {});
      sub.close();
    },
  };
}

/** GLIDE returns a RESP3 map as `[{ key, value }, ...]` (its GlideRecord): made a flat `[key, value, ...]` array. */
function flatRecord(reply: unknown): unknown {
  if (!Array.isArray(reply) || !reply.every((e) => typeof e === 'object' && e !== null && 'key' in e && 'value' in e)) return reply;
  return (reply as Array<{ key: unknown; value: unknown }>).flatMap((e) => [e.key, e.value]);
}
