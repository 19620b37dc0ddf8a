/**
 * The server's `maxmemory-policy`, read once at start: every latchkey key has an expiry, so any
 * policy but `noeviction` lets Redis delete a lock key under memory pressure while its holder
 * still counts its lease valid (docs/operations.md, "Eviction"). A `CONFIG GET` refused by an ACL
 * or a managed service is not an error: the check is skipped.
 */
import { adaptClient } from '../client/detect.js';
import type { ScriptClient } from '../client/script-client.js';

/** What {@link checkEvictionPolicy} found on one server. */
export interface EvictionPolicyReport {
  /** The server's `maxmemory-policy`, or null when it could not be read (see `skipped`). */
  readonly policy: string | null;
  /** The server's `maxmemory` in bytes (0: no limit, the policy never applies), or null when unread. */
  readonly maxmemory: number | null;
  /** True when the policy can evict keys that have an expiry, lock keys included: every policy but `noeviction`. */
  readonly evictsLockKeys: boolean;
  /** Why the policy could not be read (CONFIG refused by an ACL or a managed service, …); absent when it was. */
  readonly skipped?: string;
}

/** True for the policies that can evict a key with a TTL: `volatile-*` and `allkeys-*`. */
export function evictsKeysWithTtl(policy: string): boolean {
  return /^(volatile|allkeys)-/.test(policy);
}

/** The value of one parameter in a CONFIG GET reply: a flat array (RESP2) or a map (RESP3). */
export function configValue(reply: unknown, parameter: string): string | null {
  if (Array.isArray(reply)) {
    for (let i = 0; i + 1 < reply.length; i += 2) if (String(reply[i]) === parameter) return String(reply[i + 1]);
    return null;
  }
  if (reply instanceof Map) {
    const value: unknown = reply.get(parameter);
    return value === undefined ? null : String(value);
  }
  if (typeof reply === 'object' && reply !== null && parameter in reply) return String((reply as Record<string, unknown>)[parameter]);
  return null;
}

/** Reads `maxmemory-policy` and `maxmemory` through `client`; never rejects. */
export async function readEvictionPolicy(client: ScriptClient): Promise<EvictionPolicyReport> {
  const skipped = (why: string): EvictionPolicyReport => ({ policy: null, maxmemory: null, evictsLockKeys: false, skipped: why });
  if (!client.configGet) return skipped('the client cannot send CONFIG GET');
  try {
    const policy = configValue(await client.configGet('maxmemory-policy'), 'maxmemory-policy');
    if (policy === null) return skipped('CONFIG GET maxmemory-policy gave no value');
    const limit = configValue(await client.configGet('maxmemory'), 'maxmemory');
    const maxmemory = limit === null || !/^\d+$/.test(limit) ? null : Number(limit);
    return { policy, maxmemory, evictsLockKeys: evictsKeysWithTtl(policy) };
  } catch (error) {
    return skipped(`CONFIG GET refused: ${error instanceof Error ? error.message : String(error)}`.slice(0, 200));
  }
}

/**
 * Reads the `maxmemory-policy` of the Redis behind `redis` (an ioredis or node-redis client; on a
 * cluster client, of the node the driver sends CONFIG GET to: check every master). A manager
 * created with a `logger` or an `evictionPolicy` hook does this by itself at start and warns;
 * this function is for a health check or a start-up assertion without either. It never rejects:
 * a refused CONFIG GET comes back with `skipped` set.
 *
 * @example
 * ```ts
 * const report = await checkEvictionPolicy(redis);
 * if (report.evictsLockKeys) throw new Error(`maxmemory-policy ${report.policy} can evict lock keys`);
 * ```
 */
export function checkEvictionPolicy(redis: unknown): Promise<EvictionPolicyReport> {
  return readEvictionPolicy(adaptClient(redis));
}
