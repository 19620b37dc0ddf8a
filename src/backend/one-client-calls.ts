import type { ScriptClient } from '../client/script-client.js';
import { runScript } from '../lua/run-script.js';
import { holderNameScript, registerHolderScript } from '../lua/scripts.generated.js';
import type { Backend } from './backend.js';
import { readFenced, writeFenced } from './fenced-resource.js';

/** The calls that are the same on every backend whose keys live behind one client. */
export type OneClientCalls = Pick<Backend, 'fencedWrite' | 'fencedRead' | 'registerHolder' | 'lookupHolder'>;

/**
 * Fenced writes and reads and the holder registry, on one Redis (or one Cluster client, which
 * routes each call by its key): shared by the Redis backend and the compat backend. `client`: the
 * backend's client, once it is connected.
 */
export function oneClientCalls(client: () => ScriptClient | Promise<ScriptClient>): OneClientCalls {
  return {
    async fencedWrite(resource, value, fence) {
      return writeFenced(await client(), resource, value, fence);
    },
    async fencedRead(resource) {
      return readFenced(await client(), resource);
    },
    async registerHolder(key, who, ttl) {
      await runScript(await client(), registerHolderScript, [key], [who, String(ttl)]);
    },
    async lookupHolder(key) {
      const who = await runScript(await client(), holderNameScript, [key], []);
      return typeof who === 'string' ? who : null;
    },
  };
}
