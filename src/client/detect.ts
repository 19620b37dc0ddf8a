import { InvalidOptionError } from '../errors.js';
import { ioredisAdapter, isIoredis } from './ioredis-adapter.js';
import { isNodeRedis, nodeRedisAdapter } from './node-redis-adapter.js';
import type { ScriptClient } from './script-client.js';

const EXPECTED_CLIENT = 'an ioredis client (new Redis(...)) or a node-redis v5 client (createClient(...))';

/** Wraps a client the user already has; it is borrowed and never modified or closed. */
export function adaptClient(client: unknown): ScriptClient {
  if (isIoredis(client)) return ioredisAdapter(client, false);
  if (isNodeRedis(client)) return nodeRedisAdapter(client, false);
  throw new InvalidOptionError('redis', EXPECTED_CLIENT, client);
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
    await client.connect();
    return nodeRedisAdapter(client, true);
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
