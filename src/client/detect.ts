import { InvalidOptionError, UnsupportedError } from '../errors.js';
import { glideAdapter, isGlide } from './glide-adapter.js';
import { ioredisAdapter, isIoredis } from './ioredis-adapter.js';
import { isNodeRedis, nodeRedisAdapter } from './node-redis-adapter.js';
import type { ScriptClient } from './script-client.js';

const EXPECTED_CLIENT =
  'an ioredis or iovalkey client (new Redis(...)), a node-redis client (createClient(...)) or a Valkey GLIDE GlideClient or GlideClusterClient (await GlideClient.createClient(...))';

/** Wraps a client the user already has; it is borrowed and never modified or closed. */
export function adaptClient(client: unknown, option = 'redis'): ScriptClient {
  if (typeof client === 'string' && option === 'redis') {
    throw new InvalidOptionError(option, `${EXPECTED_CLIENT}; for a URL, use the "url" option instead: createLocks({ url: 'redis://…' })`, client, 'a string (not shown: a URL may hold a password)');
  }
  if (isIoredis(client)) return ioredisAdapter(client, false);
  if (isNodeRedisSentinel(client)) {
    throw new UnsupportedError(
      'A node-redis Sentinel client (createSentinel)',
      'it spreads commands over a pool of connections with its own sendCommand signature, so latchkey cannot send a command on the connection it needs (WAIT after a lock\'s write, CONFIG GET, SCAN). Give an ioredis client with Sentinel options (new Redis({ sentinels, name })), or a node-redis client of the primary',
    );
  }
  if (isNodeRedis(client)) return nodeRedisAdapter(client, false);
  if (isGlide(client)) return glideAdapter(client);
  throw new InvalidOptionError(option, EXPECTED_CLIENT, client);
}

/** A node-redis `RedisSentinel`: it has node-redis's methods, and asks its sentinels for the nodes. */
function isNodeRedisSentinel(client: unknown): boolean {
  return isNodeRedis(client) && typeof (client as { getSentinelNode?: unknown }).getSentinelNode === 'function' && typeof (client as { getMasterNode?: unknown }).getMasterNode === 'function';
}

/**
 * Connects to `url` with whichever driver is installed (ioredis first, then node-redis).
 * The client is latchkey's own, closed by `locks.close()`.
 */
export async function connectUrl(url: string): Promise<ScriptClient> {
  const ioredis = await optionalImport('ioredis');
  if (ioredis) {
    const Redis = (ioredis.default ?? ioredis.Redis) as new (url: string, options: object) => unknown;
    const client = new Redis(url, { lazyConnect: false });
    if (!isIoredis(client)) throw new InvalidOptionError('url', EXPECTED_CLIENT, client);
    client.on('error', () => {});
    return ioredisAdapter(client, true);
  }
  const nodeRedis = await optionalImport('redis');
  if (nodeRedis) {
    const createClient = nodeRedis.createClient as (options: { url: string }) => unknown;
    const client = createClient({ url });
    if (!isNodeRedis(client)) throw new InvalidOptionError('url', EXPECTED_CLIENT, client);
    client.on('error', () => {});
    const adapter = nodeRedisAdapter(client, true); // it records the connection errors from here on
    // Not waited for: commands sent meanwhile queue until it is open, and latchkey bounds its own
    // waits; a Redis that is down is then reported as unreachable, with the connection's error.
    client.connect().catch(() => {});
    return adapter;
  }
  throw new InvalidOptionError('url', 'the "ioredis" or "redis" package to be installed (npm install ioredis)', url);
}

async function optionalImport(name: string): Promise<Record<string, unknown> | undefined> {
  try {
    return (await import(name)) as Record<string, unknown>;
  } catch (error) {
    if ((error as { code?: string }).code === 'ERR_MODULE_NOT_FOUND' || (error as { code?: string }).code === 'MODULE_NOT_FOUND') {
      return undefined;
    }
    throw error;
  }
}

/** `host:port` of a client or a URL, for messages; never its password. */
export function addressOf(clientOrUrl: unknown): string | undefined {
  if (typeof clientOrUrl === 'string') {
    try {
      const url = new URL(clientOrUrl);
      return `${url.hostname}:${url.port || '6379'}`;
    } catch {
      return undefined;
    }
  }
  const options = (clientOrUrl as { options?: { host?: unknown; port?: unknown; url?: unknown; socket?: { host?: unknown; port?: unknown } } })
    ?.options;
  if (!options) return glideAddress(clientOrUrl);
  if (typeof options.host === 'string' && typeof options.port === 'number') return `${options.host}:${options.port}`;
  if (typeof options.url === 'string') return addressOf(options.url);
  const socket = options.socket;
  if (socket && (typeof socket.host === 'string' || typeof socket.port === 'number')) {
    return `${typeof socket.host === 'string' ? socket.host : 'localhost'}:${typeof socket.port === 'number' ? socket.port : 6379}`;
  }
  return undefined;
}

/** A GLIDE client's first address: it keeps the options it was created with as `config` (not a typed field: read defensively). */
function glideAddress(client: unknown): string | undefined {
  const first = (client as { config?: { addresses?: { host?: unknown; port?: unknown }[] } } | undefined)?.config?.addresses?.[0];
  if (!first || typeof first.host !== 'string') return undefined;
  return `${first.host}:${typeof first.port === 'number' ? first.port : 6379}`;
}
