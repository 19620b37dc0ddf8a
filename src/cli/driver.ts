/**
 * The Redis client the `latchkey` command connects with: whichever driver is installed beside
 * latchkey (ioredis first, then node-redis; `LATCHKEY_CLIENT` picks one). latchkey declares both
 * as optional peers and installs neither, so that a project gets exactly the client it asked for,
 * in one copy (see package.json and docs/cli.md).
 */
import { quitOrForce } from '../client/script-client.js';
import { CliError, EXIT } from './exit-codes.js';

/** How long the first connection may take before the command gives up, ms. */
export const CONNECT_TIMEOUT = 5000;

/** The environment variable that picks the driver when both are installed. */
export const CLIENT_ENV = 'LATCHKEY_CLIENT';

/** A client the command made, and how to end it. */
export interface CliClient {
  /** The driver's own client, for `createLocks`. */
  readonly client: unknown;
  /** Quits (pending replies first), dropping the connection if that takes too long. */
  close(): Promise<void>;
}

export interface CliDriver {
  /** The package: `ioredis` or `redis`. */
  readonly name: 'ioredis' | 'redis';
  /**
   * Connects, and rejects with the connection's own error (ECONNREFUSED, a TLS or AUTH failure)
   * at the first failed attempt, or after {@link CONNECT_TIMEOUT}. Once connected, the client
   * reconnects by itself (a Redis restart during a long `exec` is survived, within the TTL).
   */
  connect(url: string): Promise<CliClient>;
  /** A client for a Redlock node that was down at start: it keeps trying in the background, and its commands fail at once meanwhile. */
  background(url: string): CliClient;
}

type Ioredis = typeof import('ioredis');
type NodeRedis = typeof import('redis');

/** Backoff before reconnection attempt `n` (from 1), ms. */
const backoff = (n: number): number => Math.min(n * 100, 1000);

/** The installed driver, or a {@link CliError} that says what to install. */
export async function loadDriver(env: NodeJS.ProcessEnv = process.env): Promise<CliDriver> {
  const wanted = env[CLIENT_ENV];
  if (wanted !== undefined && wanted !== '' && wanted !== 'ioredis' && wanted !== 'redis') {
    throw new CliError(`${CLIENT_ENV}: "${wanted}" is not a client package (expected ioredis or redis)`, EXIT.USAGE);
  }
  if (wanted !== 'redis') {
    const ioredis = await optionalImport<Ioredis>('ioredis');
    if (ioredis) return ioredisDriver(ioredis);
  }
  if (wanted !== 'ioredis') {
    const nodeRedis = await optionalImport<NodeRedis>('redis');
    if (nodeRedis) return nodeRedisDriver(nodeRedis);
  }
  const which = wanted ? `the ${wanted} package installed beside it (${CLIENT_ENV}=${wanted})` : 'a Redis client installed beside it, ioredis or redis';
  const install = wanted || 'ioredis';
  throw new CliError(`latchkey needs ${which}: npm install ${install} (with npx: npx -p latchkey -p ${install} latchkey …)`, EXIT.ERROR);
}

async function optionalImport<T>(name: string): Promise<T | undefined> {
  try {
    return (await import(name)) as T;
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') return undefined;
    throw error;
  }
}

/** Rejects with `lastError()` (or a plain timeout) if `connecting` has not settled within {@link CONNECT_TIMEOUT}. */
function withinConnectTimeout<T>(connecting: Promise<T>, lastError: () => unknown): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(lastError() ?? new Error(`no answer within ${CONNECT_TIMEOUT / 1000} s`)), CONNECT_TIMEOUT);
  });
  return Promise.race([connecting, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Connects `client` within {@link CONNECT_TIMEOUT}; when it cannot, drops it and rejects with the
 * connection's own error (ECONNREFUSED, a TLS or AUTH failure), which says more than "Connection
 * is closed".
 */
async function connectOrDrop(client: { on(event: 'error', listener: (error: unknown) => void): unknown; connect(): Promise<unknown> }, drop: () => void): Promise<void> {
  let lastError: unknown;
  client.on('error', (error: unknown) => {
    lastError = error;
  });
  try {
    await withinConnectTimeout(client.connect(), () => lastError);
  } catch (error) {
    drop();
    throw lastError ?? error;
  }
}

function ioredisDriver({ Redis }: Ioredis): CliDriver {
  return {
    name: 'ioredis',
    async connect(url) {
      const client = new Redis(url, { lazyConnect: true, connectTimeout: CONNECT_TIMEOUT, maxRetriesPerRequest: 2, retryStrategy: backoff });
      await connectOrDrop(client, () => client.disconnect());
      return { client, close: () => quitOrForce(() => client.quit(), () => client.disconnect()) };
    },
    background(url) {
      const client = new Redis(url, { maxRetriesPerRequest: 0, retryStrategy: backoff });
      client.on('error', () => {});
      return { client, close: () => quitOrForce(() => client.quit(), () => client.disconnect()) };
    },
  };
}

function nodeRedisDriver({ createClient }: NodeRedis): CliDriver {
  /** Commands sent while the connection is down fail at once (as ioredis's maxRetriesPerRequest does): the watchdog retries within the TTL. */
  const make = (url: string, reconnect: () => boolean) =>
    createClient({
      url,
      disableOfflineQueue: true,
      socket: { connectTimeout: CONNECT_TIMEOUT, reconnectStrategy: (retries: number) => (reconnect() ? backoff(retries + 1) : false) },
    });
  const closer = (client: ReturnType<typeof make>) => () => quitOrForce(() => client.close(), () => client.destroy());
  return {
    name: 'redis',
    async connect(url) {
      let connected = false;
      // No retry before the first connection: it fails with the connection's own error, at once.
      const client = make(url, () => connected);
      await connectOrDrop(client, () => {
        if (client.isOpen) client.destroy();
      });
      connected = true;
      return { client, close: closer(client) };
    },
    background(url) {
      const client = make(url, () => true);
      client.on('error', () => {});
      client.connect().catch(() => {});
      return { client, close: closer(client) };
    },
  };
}
