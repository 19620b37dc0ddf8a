import type { ScriptClient } from '../client/script-client.js';
import { BackendError, UnsupportedError } from '../errors.js';
import { DEFAULT_PREFIX, inboxPrefix, type LockKeys } from '../keys.js';
import { asInteger, runScript } from '../lua/run-script.js';
import {
  compatAcquireScript,
  compatExtendScript,
  compatInspectScript,
  compatReleaseScript,
  leaveScript,
} from '../lua/scripts.generated.js';
import { FENCE_RETENTION, type Backend, type OwnershipReply, type ReleaseReply } from './backend.js';
import { openInbox, trackInboxes } from './inbox.js';
import { oneClientCalls } from './one-client-calls.js';
import { acquireReply, asSnapshot } from './redis-calls.js';

/** The legacy lock formats `createLocks({ compat })` interoperates with. */
export type CompatMode = 'timestamp' | 'timestamp-seconds';

/**
 * How long the lock key outlives its timestamp (ms): legacy clients then see an expired
 * timestamp and take over with GETSET, their usual path, instead of finding the key gone between
 * their SETNX and their GET (a Java client of the seeds throws on that GET). It also bounds how
 * long a crashed latchkey holder's keys stay in Redis.
 */
export const COMPAT_LINGER = 1000;

/**
 * A single Redis whose lock keys are shared with services still running the seeds' timestamp lock
 * (SETNX of an expiry timestamp, GET and GETSET to take over, DEL to release). The lock key is
 * `prefix + name` exactly, with the value those services expect; latchkey's own bookkeeping (owner
 * token, fence counter, wait queue) lives in `<prefix>{<name>}:…` keys beside it.
 * Releases only wake latchkey waiters (legacy clients neither queue nor listen, and a grant inside
 * a release would skip the timestamp they check), so `handsOff` is false. See docs/safety.md.
 */
export function compatBackend(client: ScriptClient | Promise<ScriptClient>, prefix: string, mode: CompatMode, server?: string): Backend {
  const unit = mode === 'timestamp-seconds' ? '1000' : '1';
  const linger = String(COMPAT_LINGER);
  let ready: ScriptClient | undefined = 'then' in client ? undefined : checked(client);
  const pending = 'then' in client ? client : undefined;
  const connect = async (): Promise<ScriptClient> => {
    let c: ScriptClient;
    try {
      c = await pending!;
    } catch (error) {
      throw new BackendError('connect', error instanceof Error ? error.message : String(error), { cause: error });
    }
    ready = checked(c);
    return ready;
  };
  const legacyKey = (keys: LockKeys): string => prefix + keys.name;
  // The prefix is often "" in this mode: the inbox channels keep latchkey's own, not a bare "inbox:".
  const inboxes = inboxPrefix(prefix === '' ? DEFAULT_PREFIX : prefix);
  const inboxCloser = trackInboxes();

  return {
    name: `redis compat ${mode}${ready ? ` (${ready.driver})` : ''}`,
    server,
    lastError: () => ready?.lastError?.(),
    handsOff: false,
    semaphores: false, // the mode is for legacy lock keys; a semaphore has no legacy counterpart
    async acquire(keys, token, ttl, queue) {
      const scriptKeys = [legacyKey(keys), keys.owner, keys.fence, keys.queue, keys.alive];
      const reply = await runScript(
        ready ?? (await connect()),
        compatAcquireScript,
        scriptKeys,
        [token, String(ttl), String(FENCE_RETENTION), queue?.member ?? '', String(queue?.entryTtl ?? 0), unit, linger],
      );
      return acquireReply(reply, compatAcquireScript);
    },
    async release(keys, token): Promise<ReleaseReply> {
      const reply = await runScript(
        ready ?? (await connect()),
        compatReleaseScript,
        [legacyKey(keys), keys.owner, keys.queue, keys.alive],
        [token, inboxes],
      );
      return ownership(asInteger(reply, compatReleaseScript), 'release');
    },
    async extend(keys, token, ttl) {
      const reply = await runScript(ready ?? (await connect()), compatExtendScript, [legacyKey(keys), keys.owner], [token, String(ttl), unit, linger]);
      return ownership(asInteger(reply, compatExtendScript), 'extend');
    },
    async leave(keys, member, token) {
      // The owner key holds the token of the lease that holds the lock, as the lock key does in leave.lua.
      const reply = await runScript(ready ?? (await connect()), leaveScript, [keys.owner, keys.queue, keys.alive], [member, token]);
      return asInteger(reply, leaveScript) === 1;
    },
    ...oneClientCalls(() => ready ?? connect()),
    async inspect(keys) {
      const reply = await runScript(
        ready ?? (await connect()),
        compatInspectScript,
        [legacyKey(keys), keys.owner, keys.fence, keys.queue],
        [unit],
      );
      return asSnapshot(reply, compatInspectScript);
    },
    lockNames() {
      return Promise.reject(
        new UnsupportedError(
          'Listing locks in compat mode',
          'the legacy lock keys have no latchkey prefix or hash tag to scan for (a SCAN would return every key of the database); inspect a lock by name instead',
        ),
      );
    },
    async watchInbox(managerId, listener) {
      const client = ready ?? (await connect());
      return inboxCloser.open((signal) => openInbox(client, inboxes + managerId, listener, signal));
    },
    async close() {
      await inboxCloser.closeAll(); // an inbox still opening ends too, its connection closed
      const c = ready ?? (await pending?.catch(() => undefined));
      await c?.close();
    },
  };
}

/** Compat mode runs on one Redis: its legacy key and latchkey's keys beside it do not share a Cluster slot. */
function checked(client: ScriptClient): ScriptClient {
  if (client.cluster) {
    throw new UnsupportedError(
      'The compat option on Redis Cluster',
      'the legacy lock key and latchkey\'s keys beside it are in different slots, so no script can check and take them atomically; use one Redis (the legacy services used one)',
    );
  }
  return client;
}

function ownership(code: number, operation: string): OwnershipReply {
  if (code === 1) return 'ok';
  if (code === 0) return 'gone';
  if (code === -1) return 'taken';
  throw new BackendError(operation, `unexpected reply ${code}`);
}
