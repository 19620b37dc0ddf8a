import type { ScriptClient } from '../client/script-client.js';
import { BackendError } from '../errors.js';
import type { LockKeys } from '../keys.js';
import { asInteger, asPair, runScript } from '../lua/run-script.js';
import { acquireScript, extendScript, fencedReadScript, fencedWriteScript, releaseScript } from '../lua/scripts.generated.js';
import { FENCE_RETENTION, type Backend, type OwnershipReply } from './backend.js';
import { ReleaseHub } from './release-hub.js';

const OWNERSHIP: Record<number, OwnershipReply> = { 1: 'ok', 0: 'gone', [-1]: 'taken' };

function ownership(code: number, operation: string): OwnershipReply {
  const reply = OWNERSHIP[code];
  if (!reply) throw new BackendError(operation, `unexpected reply ${code}`);
  return reply;
}

/**
 * One Redis server (or a primary with replicas behind the driver). Every operation is one
 * script, one round trip.
 */
export function redisBackend(client: ScriptClient | Promise<ScriptClient>): Backend {
  let ready: ScriptClient | undefined = 'then' in client ? undefined : client;
  const pending = 'then' in client ? client : undefined;
  const get = async (): Promise<ScriptClient> => {
    if (ready) return ready;
    try {
      ready = await pending!;
      return ready;
    } catch (error) {
      throw new BackendError('connect', error instanceof Error ? error.message : String(error), { cause: error });
    }
  };
  let hub: ReleaseHub | undefined;
  const ttlString = (ttl: number): string => String(ttl);

  return {
    name: ready ? `redis (${ready.driver})` : 'redis',
    async acquire(keys: LockKeys, token: string, ttl: number) {
      const reply = await runScript(ready ?? (await get()), acquireScript, [keys.lock, keys.fence], [
        token,
        ttlString(ttl),
        String(FENCE_RETENTION),
      ]);
      const [status, value] = asPair(reply, acquireScript);
      return status === 1 ? { acquired: true, fence: value } : { acquired: false, ttl: value };
    },
    async release(keys, token) {
      const reply = await runScript(ready ?? (await get()), releaseScript, [keys.lock], [token, keys.channel]);
      return ownership(asInteger(reply, releaseScript), 'release');
    },
    async extend(keys, token, ttl) {
      const reply = await runScript(ready ?? (await get()), extendScript, [keys.lock], [token, ttlString(ttl)]);
      return ownership(asInteger(reply, extendScript), 'extend');
    },
    async fencedWrite(resource, value, fence) {
      const reply = await runScript(ready ?? (await get()), fencedWriteScript, [resource], [value, String(fence)]);
      const [status, highest] = asPair(reply, fencedWriteScript);
      return { accepted: status === 1, highest };
    },
    async fencedRead(resource) {
      const c = ready ?? (await get());
      const reply = await runScript(c, fencedReadScript, [resource], []);
      if (reply === null || reply === undefined) return null;
      if (Array.isArray(reply) && reply.length === 2 && typeof reply[0] === 'string') {
        return { value: reply[0], fence: asInteger(reply[1], fencedReadScript) };
      }
      throw new BackendError('fencedRead', `unexpected reply ${JSON.stringify(reply)}`);
    },
    async watchReleases(keys, listener) {
      hub ??= new ReleaseHub(ready ?? (await get()));
      try {
        return await hub.watch(keys.channel, listener);
      } catch (error) {
        throw new BackendError('subscribe', error instanceof Error ? error.message : String(error), { cause: error });
      }
    },
    async close() {
      await hub?.close();
      const c = ready ?? (await pending?.catch(() => undefined));
      await c?.close();
    },
  };
}
