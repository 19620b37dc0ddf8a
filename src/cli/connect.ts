import { hostname } from 'node:os';
import { Redis } from 'ioredis';
import { createLocks, type Locks } from '../index.js';
import { CliError, EXIT } from './exit-codes.js';

/** The connection options every subcommand takes. */
export interface ConnectionOptions {
  readonly url?: string;
  readonly redlock?: string;
  readonly prefix?: string;
}

export const DEFAULT_URL = 'redis://127.0.0.1:6379';
/** How long the first connection may take before the command gives up. */
const CONNECT_TIMEOUT = 5000;

/** Where a URL points, for messages: scheme, user, host and port; never the password. */
export function describeUrl(url: string): string {
  try {
    const u = new URL(url);
    const user = u.username ? `${decodeURIComponent(u.username)}@` : '';
    return `${u.protocol}//${user}${u.hostname}:${u.port || '6379'}`;
  } catch {
    return '(an unparsable URL)';
  }
}

function checkUrl(url: string, option: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new CliError(`${option}: "${url}" is not a URL (expected redis://host:port or rediss://user:password@host:port/db)`, EXIT.USAGE);
  }
  if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') {
    throw new CliError(`${option}: ${describeUrl(url)} is not a redis:// or rediss:// URL`, EXIT.USAGE);
  }
  return url;
}

/**
 * Connects, and fails fast with a clear message when Redis is not there. Once connected, the
 * client reconnects by itself (a Redis restart during a long `exec` is survived, within the TTL).
 */
async function connectOne(url: string): Promise<Redis> {
  const client = new Redis(url, {
    lazyConnect: true,
    connectTimeout: CONNECT_TIMEOUT,
    maxRetriesPerRequest: 2,
    retryStrategy: (times) => Math.min(times * 100, 1000),
  });
  let lastError: unknown;
  client.on('error', (error: unknown) => {
    lastError = error;
  });
  try {
    await Promise.race([
      client.connect(),
      new Promise((_, reject) => setTimeout(() => reject(lastError ?? new Error(`no answer within ${CONNECT_TIMEOUT / 1000} s`)), CONNECT_TIMEOUT).unref()),
    ]);
    return client;
  } catch (error) {
    client.disconnect();
    // The connection's own error (ECONNREFUSED, a TLS or AUTH failure) says more than "Connection is closed".
    const cause = lastError ?? error;
    const reason = cause instanceof Error ? cause.message : String(cause);
    throw new CliError(`cannot connect to ${describeUrl(url)}: ${reason}`, EXIT.UNAVAILABLE, { cause: error });
  }
}

/** An open manager and the clients to close after it. */
export interface Connection {
  readonly locks: Locks;
  /** Where it connected, for messages (no passwords). */
  readonly where: string;
  close(): Promise<void>;
}

/** The holder description the command records: host and pid. */
export const HOLDER = `${hostname()} pid ${process.pid}`;

/** Connects as the options say: --redlock, else --url, else REDIS_URL, else 127.0.0.1:6379. */
export async function connect(options: ConnectionOptions, extra: { ttl?: number } = {}): Promise<Connection> {
  const prefix = options.prefix;
  if (prefix !== undefined && (prefix === '' || /[{}]/.test(prefix))) {
    throw new CliError(`--prefix: "${prefix}" must be non-empty and may not contain { or }`, EXIT.USAGE);
  }
  let clients: Redis[];
  let where: string;
  if (options.redlock !== undefined) {
    if (options.url !== undefined) throw new CliError('--url and --redlock exclude each other: give one', EXIT.USAGE);
    const urls = options.redlock.split(',').map((u) => checkUrl(u.trim(), '--redlock'));
    if (urls.length < 2) throw new CliError('--redlock: give at least 2 URLs separated by commas (3 or 5 independent masters)', EXIT.USAGE);
    // A minority of nodes may be down: Redlock works on without them.
    const settled = await Promise.allSettled(urls.map((url) => connectOne(url)));
    const up = settled.filter((s): s is PromiseFulfilledResult<Redis> => s.status === 'fulfilled').map((s) => s.value);
    if (up.length <= urls.length / 2) {
      for (const c of up) c.disconnect();
      const reasons = settled.flatMap((s) => (s.status === 'rejected' ? [(s.reason as Error).message] : []));
      throw new CliError(`cannot reach a majority of the Redlock nodes: ${reasons.join('; ')}`, EXIT.UNAVAILABLE);
    }
    clients = settled.map((s, i) =>
      s.status === 'fulfilled'
        ? s.value
        : new Redis(urls[i]!, { maxRetriesPerRequest: 0, retryStrategy: (times: number) => Math.min(times * 100, 1000) }).on('error', () => {}),
    );
    where = `redlock over ${urls.map(describeUrl).join(', ')}`;
  } else {
    const url = checkUrl(options.url ?? process.env.REDIS_URL ?? DEFAULT_URL, options.url !== undefined ? '--url' : process.env.REDIS_URL ? 'REDIS_URL' : 'the default URL');
    clients = [await connectOne(url)];
    where = describeUrl(url);
  }
  const locks = createLocks({
    ...(clients.length === 1 ? { redis: clients[0] } : { redlock: clients }),
    ...(prefix === undefined ? {} : { prefix }),
    ...(extra.ttl === undefined ? {} : { ttl: extra.ttl }),
    holder: HOLDER,
  });
  return {
    locks,
    where,
    close: async () => {
      await locks.close();
      await Promise.all(clients.map((c) => c.quit().catch(() => c.disconnect())));
    },
  };
}
