import { hostname } from 'node:os';
import { createLocks, type Locks, type RedisClientLike } from '../index.js';
import { loadDriver, type CliClient, type CliDriver } from './driver.js';
import { CliError, EXIT } from './exit-codes.js';

/** The connection options every subcommand takes. */
export interface ConnectionOptions {
  readonly url?: string;
  readonly redlock?: string;
  readonly prefix?: string;
}

export const DEFAULT_URL = 'redis://127.0.0.1:6379';

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

/**
 * Text that failed to parse as a URL, as it may be shown: whatever stands between the scheme and
 * the last `@` (a user and password, perhaps with the character that broke the parse) replaced
 * by `***`.
 */
export function withoutCredentials(text: string): string {
  const at = text.lastIndexOf('@');
  if (at < 0) return text;
  const scheme = text.indexOf('://');
  const from = scheme >= 0 && scheme < at ? scheme + 3 : 0;
  return `${text.slice(0, from)}***${text.slice(at)}`;
}

/** `url`, checked; `shown`: how an error names it (by default the text without its credentials). */
function checkUrl(url: string, option: string, shown = `"${withoutCredentials(url)}"`): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new CliError(`${option}: ${shown} is not a URL (expected redis://host:port or rediss://user:password@host:port/db)`, EXIT.USAGE);
  }
  if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') {
    throw new CliError(`${option}: ${describeUrl(url)} is not a redis:// or rediss:// URL`, EXIT.USAGE);
  }
  return url;
}

/** Connects with `driver`, and fails fast with a clear message when Redis is not there. */
async function connectOne(driver: CliDriver, url: string): Promise<CliClient> {
  try {
    return await driver.connect(url);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
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
  let clients: CliClient[];
  let where: string;
  if (options.redlock !== undefined) {
    if (options.url !== undefined) throw new CliError('--url and --redlock exclude each other: give one', EXIT.USAGE);
    // A password with a comma in it splits too: then no piece is shown, for a piece may be part of it.
    const secret = options.redlock.includes('@');
    const urls = options.redlock.split(',').map((u, i) => checkUrl(u.trim(), '--redlock', secret ? `URL ${i + 1}` : undefined));
    if (urls.length < 2) throw new CliError('--redlock: give at least 2 URLs separated by commas (3 or 5 independent masters)', EXIT.USAGE);
    const driver = await loadDriver();
    // A minority of nodes may be down: Redlock works on without them.
    const settled = await Promise.allSettled(urls.map((url) => connectOne(driver, url)));
    const up = settled.filter((s): s is PromiseFulfilledResult<CliClient> => s.status === 'fulfilled').map((s) => s.value);
    if (up.length <= urls.length / 2) {
      await Promise.all(up.map((c) => c.close()));
      const reasons = settled.flatMap((s) => (s.status === 'rejected' ? [(s.reason as Error).message] : []));
      throw new CliError(`cannot reach a majority of the Redlock nodes: ${reasons.join('; ')}`, EXIT.UNAVAILABLE);
    }
    clients = settled.map((s, i) => (s.status === 'fulfilled' ? s.value : driver.background(urls[i]!)));
    where = `redlock over ${urls.map(describeUrl).join(', ')}`;
  } else {
    const url = checkUrl(options.url ?? process.env.REDIS_URL ?? DEFAULT_URL, options.url !== undefined ? '--url' : process.env.REDIS_URL ? 'REDIS_URL' : 'the default URL');
    clients = [await connectOne(await loadDriver(), url)];
    where = describeUrl(url);
  }
  const locks = createLocks({
    ...(clients.length === 1 ? { redis: clients[0]!.client as RedisClientLike } : { redlock: clients.map((c) => c.client as RedisClientLike) }),
    ...(prefix === undefined ? {} : { prefix }),
    ...(extra.ttl === undefined ? {} : { ttl: extra.ttl }),
    holder: HOLDER,
  });
  return {
    locks,
    where,
    close: async () => {
      await locks.close();
      await Promise.all(clients.map((c) => c.close()));
    },
  };
}
