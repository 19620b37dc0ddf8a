import { compatBackend } from './compat-backend.js';
import type { Backend } from './backend.js';
import type { EvictionPolicyReport } from './eviction-policy.js';
import { createMemoryStore, memoryBackend, MemoryStore } from './memory-store.js';
import { redisBackend, type Replication } from './redis-backend.js';
import { redlockBackend } from './redlock-backend.js';
import { adaptClient, addressOf, connectUrl } from '../client/detect.js';
import type { ScriptClient } from '../client/script-client.js';
import { InvalidOptionError } from '../errors.js';
import { checkCount } from '../manager/settings.js';
import type { LocksOptions } from '../options.js';
import { checkOptions } from '../validate.js';

/** Reports a server's eviction policy (node: a Redlock node's label). */
export type EvictionWarning = (report: EvictionPolicyReport, node?: string) => void;

/**
 * The backend a manager's options ask for: `redis`, `url`, `redlock`, `memory` (at most one), or
 * a private in-memory store; compat mode over `redis` or `url`. Every option is checked here.
 */
export function chooseBackend(o: Partial<LocksOptions>, prefix: string, onEviction?: EvictionWarning): Backend {
  const given = (['redis', 'url', 'redlock', 'memory'] as const).filter((name) => o[name] !== undefined);
  if (given.length > 1) {
    const names = given.map((name) => `"${name}"`);
    throw new InvalidOptionError(
      given.join(' and '),
      'exactly one of "redis", "url", "redlock" or "memory" (or none, for a private in-memory store)',
      given,
      `${names.slice(0, -1).join(', ')} and ${names.at(-1)!} together: keep the one the locks should live on`,
    );
  }
  if (o.nodeTimeout !== undefined && o.redlock === undefined) {
    throw new InvalidOptionError('nodeTimeout', 'to be given only with "redlock"', o.nodeTimeout);
  }
  const replication = o.replication === undefined ? undefined : checkReplication(o.replication);
  if (o.compat !== undefined) return chooseCompatBackend(o, prefix);
  if (replication && o.redis === undefined && o.url === undefined) {
    throw new InvalidOptionError('replication', 'to be given only with "redis" or "url" (one primary with replicas)', o.replication);
  }
  if (o.redis !== undefined) {
    const client = adaptClient(o.redis);
    if (replication && client.cluster) {
      // WAIT counts the replicas of the connection it is sent on; a Cluster client sends a keyless
      // command to any node, not to the master of the lock's slot that took the write.
      throw new InvalidOptionError(
        'replication',
        'a single primary with replicas (a client of one Redis, or "url"), not a Cluster client: latchkey cannot send WAIT to the master of each lock\'s slot, so it could not tell whether its replicas have the lease. Leave "replication" out on Cluster',
        o.replication,
      );
    }
    return redisBackend(client, prefix, { replication, onEvictionPolicy: onEviction, server: addressOf(o.redis) });
  }
  if (o.url !== undefined) return redisBackend(connectChecked(o.url, 'url'), prefix, { replication, onEvictionPolicy: onEviction, server: addressOf(o.url) });
  if (o.redlock !== undefined) {
    const nodes = checkRedlockNodes(o.redlock);
    const nodeTimeout = o.nodeTimeout === undefined ? undefined : checkCount(o.nodeTimeout, 'nodeTimeout', 1);
    return redlockBackend(
      nodes.map((node, i) => {
        const label = `node ${i}${addressOf(node) ? ` (${addressOf(node)})` : ''}`;
        const client = typeof node === 'string' ? connectChecked(node, `redlock[${i}]`) : adaptClient(node, `redlock[${i}]`);
        return redisBackend(client, prefix, { wake: true, label, server: addressOf(node), onEvictionPolicy: onEviction && ((report) => onEviction(report, label)) });
      }),
      { nodeTimeout },
    );
  }
  if (o.memory !== undefined) {
    if (!(o.memory instanceof MemoryStore)) throw new InvalidOptionError('memory', 'a store from createMemoryStore()', o.memory);
    return memoryBackend(o.memory);
  }
  return memoryBackend(createMemoryStore());
}

function chooseCompatBackend(o: Partial<LocksOptions>, prefix: string): Backend {
  const mode = o.compat;
  if (mode !== 'timestamp' && mode !== 'timestamp-seconds') {
    throw new InvalidOptionError('compat', '"timestamp" (an expiry in Unix milliseconds, as the legacy lock writes it) or "timestamp-seconds"', mode);
  }
  if (o.redis === undefined && o.url === undefined) {
    const other = o.redlock !== undefined ? 'redlock' : o.memory !== undefined ? 'memory' : 'the default in-memory store';
    throw new InvalidOptionError(
      'compat',
      `to be given only with "redis" or "url": the legacy services lock one key on one Redis, and ${other} is not where they look`,
      mode,
    );
  }
  if (o.replication !== undefined) {
    throw new InvalidOptionError('replication', 'not to be given with "compat" (compat mode runs no WAIT after its acquire)', o.replication);
  }
  if (o.url !== undefined) return compatBackend(connectChecked(o.url, 'url'), prefix, mode, addressOf(o.url));
  const client = adaptClient(o.redis);
  if (client.cluster) {
    throw new InvalidOptionError(
      'compat',
      'a single Redis, not a Cluster client: the legacy lock key and latchkey\'s keys beside it are in different slots, so no script can check and take them atomically',
      mode,
    );
  }
  return compatBackend(client, prefix, mode, addressOf(o.redis));
}

/** Connects to a URL given as option `option`; a failure is reported by the first call that needs the connection. */
function connectChecked(url: unknown, option: string): Promise<ScriptClient> {
  if (typeof url !== 'string' || !/^rediss?:\/\//.test(url)) {
    throw new InvalidOptionError(option, 'a redis:// or rediss:// URL', url);
  }
  const connecting = connectUrl(url);
  connecting.catch(() => {});
  return connecting;
}

function checkReplication(value: unknown): Replication {
  const o = checkOptions<{ replicas: number; timeout?: number; shortfall?: 'fail' | 'accept' }>(
    value,
    ['replicas', 'timeout', 'shortfall'],
    'replication',
  );
  const replicas = checkCount(o.replicas, 'replication.replicas', 1, 'a positive integer number of replicas');
  const timeout = o.timeout === undefined ? 100 : checkCount(o.timeout, 'replication.timeout', 1);
  if (o.shortfall !== undefined && o.shortfall !== 'fail' && o.shortfall !== 'accept') {
    throw new InvalidOptionError('replication.shortfall', '"fail" or "accept"', o.shortfall);
  }
  return { replicas, timeout, shortfall: o.shortfall ?? 'fail' };
}

function checkRedlockNodes(value: unknown): readonly unknown[] {
  if (!Array.isArray(value) || value.length === 0) {
    throw new InvalidOptionError('redlock', 'a non-empty array of clients or URLs, one per independent master', value);
  }
  // The same master twice would count its vote twice.
  const seen = new Set<unknown>();
  value.forEach((node: unknown, i) => {
    const identity = typeof node === 'string' ? addressOf(node) ?? node : node;
    if (seen.has(identity)) {
      throw new InvalidOptionError(`redlock[${i}]`, 'a master not already in the list (a repeated node would vote twice)', node);
    }
    seen.add(identity);
  });
  return value;
}

