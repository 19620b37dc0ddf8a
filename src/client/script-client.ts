/**
 * The slice of a Redis client latchkey needs, whatever the driver. Adapters wrap the user's
 * client without changing it: no `defineCommand`, no listeners on it, nothing left behind.
 */
import { settleBy } from '../deadlines.js';
import { UnreachableError } from '../errors.js';

export interface ScriptClient {
  /** Which driver is underneath. */
  readonly driver: 'ioredis' | 'node-redis' | 'valkey-glide';
  /** A Redis Cluster client: scripts are routed by their first key, waiters are told through sharded channels. */
  readonly cluster: boolean;
  /** EVALSHA; rejects with the driver's error (its message starts with NOSCRIPT when the script is not cached). */
  evalsha(sha: string, keys: readonly string[], args: readonly string[]): Promise<unknown>;
  /** EVAL with the full source. */
  eval(source: string, keys: readonly string[], args: readonly string[]): Promise<unknown>;
  /**
   * WAIT numreplicas timeout: resolves to the number of replicas that acknowledged this
   * connection's writes so far. Sent right behind a script on the same connection, it is
   * pipelined with it and covers its writes.
   */
  waitReplicas(replicas: number, timeout: number): Promise<number>;
  /**
   * Which connection the command ran on: the server's `run_id` (INFO server) and the connection's
   * `CLIENT ID` (unique on one server only: two servers number their clients alike), sent back to
   * back. Pipelined around a script and its WAIT, it tells whether they ran on one connection (see
   * runScriptReplicated). Optional: without it the check is skipped.
   */
  connectionId?(): Promise<string>;
  /**
   * CONFIG GET `parameter`: the raw reply (a flat array, or a map on RESP3). Optional: a client
   * without it skips the start-up eviction-policy check.
   */
  configGet?(parameter: string): Promise<unknown>;
  /**
   * SCRIPT LOAD: caches a script on the connection's server without running it. Optional, and
   * standalone only (a cluster client would load it on one node of many): without it, each
   * script is cached by its first EVAL after a cache miss.
   */
  scriptLoad?(source: string): Promise<unknown>;
  /** SCAN for keys matching `match` (on a cluster: on every master), all pages. */
  scan(match: string): Promise<string[]>;
  /**
   * A new connection in subscriber mode, made from the user's client's own options (TLS, ACL
   * user). `signal` aborts its making (the manager was closed): the promise rejects, and a
   * connection that waits to connect is destroyed at once (node-redis) or closed once made.
   */
  createSubscriber(signal?: AbortSignal): Promise<SubscriberConnection>;
  /**
   * The last connection error the client or latchkey's subscriber reported and has not recovered
   * from (connect ECONNREFUSED, say), for the cause of an UnreachableError. Optional.
   */
  lastError?(): Error | undefined;
  /**
   * How long after a command failed with the client's own timeout ({@link isClientTimeout}) the
   * client may still send it again, ms: an ioredis Cluster goes on retrying a refused or redirected
   * command (TRYAGAIN, MOVED, CLUSTERDOWN) from its delay queue after the command's promise timed
   * out. Optional: 0 or absent when a command that timed out can only still run ahead of the
   * commands sent after it on the same connection (one Redis).
   */
  readonly lateSends?: number;
  /** Close the connection: only for clients latchkey created itself (`{ url }`); a borrowed client is left open. */
  close(): Promise<void>;
}

/** A connection in subscriber mode, owned by latchkey. On a cluster client, channels are sharded channels (SSUBSCRIBE). */
export interface SubscriberConnection {
  subscribe(channel: string): Promise<void>;
  unsubscribe(channel: string): Promise<void>;
  /** Called with each message's channel and payload. */
  onMessage(listener: (channel: string, message: string) => void): void;
  /** Called when the connection is ready again after a reconnect: messages may have been missed meanwhile. */
  onReconnect(listener: () => void): void;
  /**
   * Optional: called when the connection ended for good and will not reconnect (the retry
   * strategy it copied from the user's client gave up), or was closed.
   */
  onEnd?(listener: () => void): void;
  /**
   * Cluster only, optional: called when sharded subscriptions may have moved or been dropped (the
   * client refreshed its slots, a node connected or went away, a `sunsubscribe` push or a MOVED
   * reply to SSUBSCRIBE). The listener checks where its channels are heard.
   */
  onTopologyChange?(listener: () => void): void;
  /** Cluster only, optional: asks the client to read the slots again (its map may be stale: a subscribe landed on a replica). */
  refreshTopology?(): void;
  /**
   * Cluster only, optional: subscribes again to a channel the client may believe it still has
   * (its subscription was dropped by the server or is on a replica), on the node its slot map
   * names now. Without it, `subscribe` is sent again.
   */
  resubscribe?(channel: string): Promise<void>;
  /**
   * Cluster only, optional: scripts run on the subscriber's own cluster client (for the inbox's
   * probes). A MOVED reply there refreshes the subscriber's slot map, which is the one that must
   * learn of a move, and never the user's client's: node-redis rejects the commands in flight on
   * a node client that a rediscovery drops, and a probe's MOVED on the user's client ended
   * waiters' attempts that way.
   */
  readonly scripts?: Pick<ScriptClient, 'evalsha' | 'eval'>;
  close(): Promise<void>;
}

/** `run_id:client id` from the replies to INFO server and CLIENT ID (see {@link ScriptClient.connectionId}). */
export function connectionIdOf(info: unknown, clientId: unknown): string {
  const runId = /run_id:([0-9a-f]+)/.exec(String(info))?.[1] ?? '?';
  return `${runId}:${String(clientId)}`;
}

/** {@link ScriptClient.connectionId} for any driver: INFO server and CLIENT ID sent back to back with `send`. */
export async function readConnectionId(send: (args: string[]) => Promise<unknown>): Promise<string> {
  const [info, id] = await Promise.all([send(['INFO', 'server']), send(['CLIENT', 'ID'])]);
  return connectionIdOf(info, id);
}

/** True when `value` is an object with a function under each of `names`: how a driver's client is recognised. */
export function hasMethods(value: unknown, ...names: string[]): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const o = value as Record<string, unknown>;
  return names.every((name) => typeof o[name] === 'function');
}

/** True when a driver error is Redis's NOSCRIPT reply. */
export function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT');
}

/** True when a driver error is Redis's WRONGTYPE reply (also when raised inside a script). */
export function isWrongType(error: unknown): boolean {
  return error instanceof Error && /WRONGTYPE/.test(error.message);
}

/**
 * True when a Redis Cluster refused a command without running it, because of where its keys are
 * rather than what they hold: TRYAGAIN (a command on several keys of a slot being migrated, of
 * which only some are on the node), or the driver giving up after following redirections
 * (ioredis and node-redis: "Too many Cluster redirections", ioredis's naming the last error).
 * Read from the driver error's message, or its cause's (latchkey's BackendError wraps it). Not
 * an UnreachableError (no reply at all), whatever its last connection error says; nor ioredis's
 * redirections whose last error was the connection's, not a node's reply ("Last error: Error:
 * Connection is closed.", a reset, a timeout): that command may have been written and run. A
 * reply (TRYAGAIN, MOVED, ASK, CLUSTERDOWN, NOSCRIPT from a node the slot moved to) is a refusal.
 */
/** A connection's own failure, after which a command written to it may have run. */
const CONNECTION_LOST = /Connection is closed|ECONNRESET|EPIPE|ETIMEDOUT|timed out/i;

export function isSlotRefusal(error: unknown): boolean {
  if ((error as { code?: unknown } | undefined)?.code === 'UNREACHABLE') return false;
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth++) {
    const redirections = /Too many Cluster redirections\.?(?:\s*Last error:\s*([\s\S]*))?/i.exec(e.message);
    if (redirections) return !CONNECTION_LOST.test(redirections[1] ?? '');
    if (/\bTRYAGAIN\b/.test(e.message)) return true;
  }
  return false;
}

/**
 * True when a command failed because the client's own timeout ended it, not because Redis answered:
 * ioredis's `commandTimeout` ("Command timed out"), Valkey GLIDE's `requestTimeout` or
 * node-redis 5/6's command `timeout` (a `TimeoutError` of each: GLIDE's names itself so, node-redis's
 * only by its class, and its `CommandTimeoutDuringMaintenanceError` extends it). Its outcome is unknown: the command may have run, may run later (it sits in the
 * connection, or the client still retries it), or may never run. Read from the error or its causes
 * (latchkey's BackendError wraps it). Not an UnreachableError (latchkey's own bound).
 */
export function isClientTimeout(error: unknown): boolean {
  if ((error as { code?: unknown } | undefined)?.code === 'UNREACHABLE') return false;
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth++) {
    if (e.message === 'Command timed out' || isTimeoutClass(e)) return true;
  }
  return false;
}

/** True when `e` is of a class named TimeoutError, or extends one; not a DOMException (AbortSignal.timeout()'s: a caller's, not a client's). */
function isTimeoutClass(e: Error): boolean {
  if (e instanceof DOMException) return false;
  if (e.name === 'TimeoutError') return true;
  for (let proto: unknown = Object.getPrototypeOf(e), depth = 0; proto && proto !== Error.prototype && depth < 5; proto = Object.getPrototypeOf(proto), depth++) {
    if ((proto as { constructor?: { name?: unknown } }).constructor?.name === 'TimeoutError') return true;
  }
  return false;
}

/** How long a connection latchkey owns gets to quit gracefully before it is dropped, ms. */
export const QUIT_TIMEOUT = 1000;

/**
 * Closes a connection latchkey owns: `quit` (pending replies arrive first), and `force` if that
 * fails or takes longer than {@link QUIT_TIMEOUT} (a hung server never answers QUIT).
 */
export async function quitOrForce(quit: () => Promise<unknown>, force: () => void): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const graceful = await Promise.race([
    quit().then(
      () => true,
      () => false,
    ),
    new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), QUIT_TIMEOUT);
      timer.unref();
    }),
  ]);
  clearTimeout(timer);
  if (!graceful) force();
}

/**
 * `promise`, or, the moment `signal` aborts, a rejection with its reason, after `onAbort()` (which
 * ends what the promise waited for: a connection that would reconnect forever is destroyed).
 */
export function unlessAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined, onAbort?: () => void): Promise<T> {
  if (!signal) return promise;
  return new Promise<T>((resolve, reject) => {
    const abort = (): void => {
      onAbort?.();
      reject(signal.reason);
    };
    if (signal.aborted) return abort();
    signal.addEventListener('abort', abort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', abort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', abort);
        reject(error);
      },
    );
  });
}

/**
 * How long a call without a wait of its own waits for Redis, ms: each SCAN page here, and the
 * calls of manager/bounded-call.ts (`inspect`, `list`'s looks, `forceRelease`, the fenced calls).
 */
export const CALL_BOUND = 5000;

/**
 * Runs a SCAN loop with `page(cursor)` returning `[next cursor, keys]`. Each page is bounded on
 * latchkey's clock ({@link CALL_BOUND}: an {@link UnreachableError}), not the whole loop: a
 * large keyspace takes many pages, each answered.
 */
export async function scanAll(page: (cursor: string) => Promise<unknown>): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const sent = performance.now();
    const reply = await settleBy(page(cursor), sent + CALL_BOUND, () => new UnreachableError('list', 'a page of SCAN', undefined, performance.now() - sent));
    if (!Array.isArray(reply) || reply.length !== 2 || !Array.isArray(reply[1])) {
      throw new Error(`unexpected SCAN reply ${JSON.stringify(reply)}`);
    }
    cursor = String(reply[0]);
    for (const key of reply[1] as unknown[]) keys.push(String(key));
  } while (cursor !== '0');
  return keys;
}
