import { isClientTimeout, type ScriptClient } from '../client/script-client.js';
import { BackendError, ReplicationError, UnreachableError } from '../errors.js';
import { escapeGlob, inboxPrefix, namesOf, type LockKeys } from '../keys.js';
import type { LuaScript } from '../lua/lua-script.js';
import { asInteger, runScript, runScriptReplicated } from '../lua/run-script.js';
import {
  acquireScript,
  extendScript,
  extendManyScript,
  leaveScript,
  multiAcquireScript,
  raiseFenceScript,
  releaseScript,
  releaseKeyScript,
  markForcedScript,
  forcedTokenScript,
  inspectScript,
  keepQueuedScript,
  semaphoreAcquireScript,
  semaphoreExtendScript,
  semaphoreLeaveScript,
  semaphoreReleaseScript,
  wakeReleaseScript,
} from '../lua/scripts.generated.js';
import { FENCE_RETENTION, type HandOff, type KeepReply, type AcquireReply, type MultiAcquireReply, type Backend, type OwnershipReply, type QueueEntry, type ReleaseReply } from './backend.js';
import { leaveOrFallBack, releaseOnKey, releasePermitsOnKey, releaseOrFallBack } from './cluster-migration.js';
import { readEvictionPolicy, type EvictionPolicyReport } from './eviction-policy.js';
import { extendManyBySlot, keepQueuedBySlot } from './cluster-batches.js';
import { extendManyOn } from './extend-many.js';
import { LateAcquires } from './late-acquires.js';
import { lockInboxPrefix, openInbox, openLockInbox, trackInboxes } from './inbox.js';
import { oneClientCalls } from './one-client-calls.js';
import { acquireCall, acquireReply, asSnapshot, keepQueuedCall, keepReplies, ownership, parseAcquire, parseRelease, parseSemaphoreRelease, parseWakeRelease, releaseArgs, type ScriptCall } from './redis-calls.js';

const RETENTION = String(FENCE_RETENTION);

/** How long a lock's fence counter lives after a lease of `ttl` ms: the lease plus the retention, as PX. */
const counterTtl = (ttl: number): string => String(ttl + FENCE_RETENTION);
/** The note a forced release leaves for the holder it broke (mark-forced.lua), beside the lock key, in its slot. */
const forcedKey = (keys: LockKeys): string => `${keys.lock}:forced`;

/** Scripts used one after the other on one lease: a cache miss on one loads the others (see recache). */
const SCRIPT_GROUPS: readonly (readonly LuaScript[])[] = [
  [acquireScript, releaseKeyScript, releaseScript, wakeReleaseScript, extendScript, extendManyScript],
  [semaphoreAcquireScript, semaphoreReleaseScript, semaphoreExtendScript],
];

export interface RedisBackendOptions {
  /** Release frees the lock and wakes the next queued waiter instead of granting it the lock (Redlock's nodes). */
  readonly wake?: boolean;
  /** A name for messages (a Redlock node's label). */
  readonly label?: string;
  /** The server as `host:port`, when known, for messages (see {@link Backend.server}). */
  readonly server?: string | undefined;
  /** Replica acknowledgement of every acquire (implies wake mode: no grant or hand-off escapes the WAIT). */
  readonly replication?: Replication | undefined;
  /** Called once with the server's eviction policy, read when the client is first ready (see eviction-policy.ts). */
  readonly onEvictionPolicy?: ((report: EvictionPolicyReport) => void) | undefined;
}

/** `WAIT replicas timeout` after each acquire; see {@link LocksOptions.replication}. */
export interface Replication {
  readonly replicas: number;
  readonly timeout: number;
  readonly shortfall: 'fail' | 'accept';
}

/**
 * One Redis server (or a primary with replicas behind the driver). Every operation is one
 * script, one round trip.
 */
/** A single Redis backend, with what Redlock needs of each of its nodes besides. */
export interface RedisBackend extends Backend {
  /** How many times a script was re-sent with EVAL after NOSCRIPT on this client (Redlock's late-reply logic needs to know). */
  readonly resends: number;
  /**
   * Redlock's acquire on this node, with keys and arguments built once for every node
   * ({@link acquireCall}, with the fence floor): acquire.lua, without replica acknowledgement or
   * semaphore (neither is offered over Redlock).
   */
  acquireWith(call: ScriptCall): Promise<AcquireReply>;
  /** wake-release.lua's call for `token` on a standalone server, to send to every node of a Redlock (they share the prefix, so the inbox channel). */
  wakeReleaseCall(keys: LockKeys, token: string): ScriptCall;
  /** Redlock's release on this node with `call` from {@link RedisBackend.wakeReleaseCall} (a node on a Cluster client builds its own). */
  releaseWith(keys: LockKeys, token: string, call: ScriptCall): Promise<ReleaseReply>;
  /** Lifts the lock's fence counter to at least `fence` (see raise-fence.lua). */
  raiseFence(keys: LockKeys, fence: number, ttl: number): Promise<void>;
}

export function redisBackend(client: ScriptClient | Promise<ScriptClient>, prefix: string, options: RedisBackendOptions = {}): RedisBackend {
  const replication = options.replication;
  const wake = options.wake === true || replication !== undefined;
  let resends = 0;
  let recaching = false;
  /**
   * A script missing from the server's cache (NOSCRIPT: a restart, a failover, SCRIPT FLUSH) means
   * its companions are gone too: they are loaded again at once, off the lock path, so that the
   * release that follows an acquire does not pay a second round trip and a compilation.
   */
  const recache = (c: ScriptClient, source: string): void => {
    const group = c.scriptLoad && !recaching ? SCRIPT_GROUPS.find((g) => g.some((script) => script.source === source)) : undefined;
    if (!group) return;
    recaching = true;
    const loads = group.filter((script) => script.source !== source).map((script) => c.scriptLoad!(script.source));
    void Promise.all(loads)
      .catch(() => {}) // each is also cached by its own first EVAL
      .finally(() => (recaching = false));
  };
  // runScript sends EVAL only after NOSCRIPT: counting them tells Redlock when a script was re-sent.
  const counting = (c: ScriptClient): ScriptClient => ({
    ...c,
    eval: (source, keys, args) => {
      resends++;
      recache(c, source);
      return c.eval(source, keys, args);
    },
  });
  let ready: ScriptClient | undefined = 'then' in client ? undefined : counting(client);
  const pending = 'then' in client ? client : undefined;
  const connect = async (): Promise<ScriptClient> => {
    try {
      ready = counting(await pending!);
      return ready;
    } catch (error) {
      throw new BackendError('connect', error instanceof Error ? error.message : String(error), { cause: error });
    }
  };
  const onPolicy = options.onEvictionPolicy;
  if (onPolicy) {
    // Off the lock path: nothing waits for it, and it never fails a lock.
    const reading = pending ? pending.then(readEvictionPolicy, () => undefined) : readEvictionPolicy(ready!);
    void reading.then((report) => report && onPolicy(report)).catch(() => {});
  }
  const inboxes = inboxPrefix(prefix);
  const inboxCloser = trackInboxes();
  /** Where a release (or a semaphore script) tells a waiter: the inbox prefix, and "1" to SPUBLISH (Cluster). */
  const publishArgs = (client: ScriptClient, keys: LockKeys): [string, string] =>
    client.cluster ? [lockInboxPrefix(keys), '1'] : [inboxes, '0'];
  /** wake-release.lua's keys and arguments (SPUBLISH's flag only on a Cluster: its optional argument). A client not yet connected counts as standalone. */
  const wakeRelease = (client: ScriptClient | undefined, keys: LockKeys, token: string): [readonly string[], readonly string[]] => [
    [keys.lock, keys.queue, keys.alive],
    client?.cluster ? [token, lockInboxPrefix(keys), '1'] : [token, inboxes],
  ];

  /** One acquire (acquire.lua, or semaphore-acquire.lua), with the WAIT of replica acknowledgement when asked. */
  const acquireOn = (client: ScriptClient, keys: LockKeys, token: string, ttl: number, queue?: QueueEntry): Promise<AcquireReply> => {
    if (keys.semaphore || replication) return acquireFully(client, keys, token, ttl, queue);
    // A lock without replica acknowledgement, the common case: the script's promise and its parse.
    const call = acquireCall(keys, token, ttl, queue);
    return runScript(client, acquireScript, call.keys, call.args, parseAcquire);
  };
  /** {@link acquireOn} for a semaphore, or with replica acknowledgement. */
  const acquireFully = async (client: ScriptClient, keys: LockKeys, token: string, ttl: number, queue?: QueueEntry): Promise<AcquireReply> => {
    const sem = keys.semaphore;
    const script = sem ? semaphoreAcquireScript : acquireScript;
    let scriptKeys: readonly string[];
    let args: readonly string[];
    if (sem) {
      scriptKeys = [keys.lock, keys.holder, keys.fence, keys.queue, keys.alive];
      args = [token, String(ttl), RETENTION, String(sem.limit), String(sem.permits), queue?.member ?? '', String(queue?.entryTtl ?? 0), ...publishArgs(client, keys)];
    } else {
      ({ keys: scriptKeys, args } = acquireCall(keys, token, ttl, queue));
    }
    if (!replication) return acquireReply(await runScript(client, script, scriptKeys, args), script);
    const [reply, acks] = await runScriptReplicated(client, script, scriptKeys, args, replication.replicas, replication.timeout);
    const outcome = acquireReply(reply, script);
    if (!outcome.acquired) return outcome;
    const replicated = acks >= replication.replicas;
    if (!replicated && replication.shortfall === 'fail') {
      await backend.release(keys, token).catch(() => {}); // else it expires by its TTL
      throw new ReplicationError(keys.name, replication.replicas, acks, replication.timeout);
    }
    return { acquired: true, fence: outcome.fence, replicated };
  };
  /** A release: release.lua (or wake-release.lua, semaphore-release.lua), with the key-alone fallback on a Cluster. */
  const releaseOn = (client: ScriptClient, keys: LockKeys, token: string, handOff?: HandOff): Promise<ReleaseReply> => {
    const [inboxAt, sharded] = publishArgs(client, keys);
    if (keys.semaphore) {
      const full = runScript(client, semaphoreReleaseScript, [keys.lock, keys.holder, keys.queue, keys.alive], [token, inboxAt, sharded], parseSemaphoreRelease);
      // On a Cluster, a slot that migrates refuses the script while nobody waits (no queue key):
      // the permits are then given back on the permits hash (see cluster-migration.ts).
      return client.cluster ? releaseOrFallBack(full, () => releasePermitsOnKey(client, keys, token, inboxAt, sharded)) : full;
    }
    // Free, and wake the next waiter: its own acquire (through the quorum, or the WAIT) takes the lock.
    const full = wake
      ? runScript(client, wakeReleaseScript, ...wakeRelease(client, keys, token), parseWakeRelease)
      : runScript(client, releaseScript, [keys.lock, keys.fence, keys.queue, keys.alive], releaseArgs(token, inboxAt, sharded, handOff), parseRelease);
    // On a Cluster, a slot that migrates refuses the script (see cluster-migration.ts): the lock
    // is then freed on its key alone.
    return client.cluster ? releaseOrFallBack(full, () => releaseOnKey(client, keys, token, inboxAt, sharded)) : full;
  };
  /** A waiter's leave of the queue (leave.lua, or semaphore-leave.lua): true when the lock holds its token. */
  const leaveOn = async (keys: LockKeys, member: string, token: string): Promise<boolean> => {
    const client = ready ?? (await connect());
    const [inboxAt, sharded] = publishArgs(client, keys);
    const full = keys.semaphore
      ? runScript(client, semaphoreLeaveScript, [keys.lock, keys.queue, keys.alive], [member, token, inboxAt, sharded]).then((left) => asInteger(left, semaphoreLeaveScript) === 1)
      : runScript(client, leaveScript, [keys.lock, keys.queue, keys.alive], [member, token]).then((left) => asInteger(left, leaveScript) === 1);
    // On a Cluster, a slot that migrates refuses it while the lock key or holders set is missing:
    // the waiter then leaves the queue on the queue key (see cluster-migration.ts).
    return client.cluster ? leaveOrFallBack(full, client, keys, member, inboxAt, sharded) : full;
  };
  // Acquires that timed out in a client that may still send them (an ioredis Cluster's retries):
  // a give-back of their token is repeated once they can no longer run (see late-acquires.ts).
  const late = new LateAcquires();
  /** One acquire on a connected client; on a client that may send a timed-out command late (a Cluster's), its token is noted. */
  const acquireVia = (client: ScriptClient, keys: LockKeys, token: string, ttl: number, queue: QueueEntry | undefined): Promise<AcquireReply> => {
    late.sending(token);
    const acquiring = acquireOn(client, keys, token, ttl, queue);
    if (!client.lateSends) return acquiring;
    return acquiring.catch((error: unknown) => {
      if (isClientTimeout(error)) late.note(token, queue?.member, client.lateSends!);
      throw error;
    });
  };
  const backend: RedisBackend = {
    name: options.label ?? (ready ? `redis (${ready.driver})` : 'redis'),
    server: options.server,
    lastError: () => ready?.lastError?.(),
    handsOff: !wake,
    semaphores: true,
    get resends() {
      return resends;
    },
    acquire(keys: LockKeys, token: string, ttl: number, queue?: QueueEntry): Promise<AcquireReply> {
      // No async function on the hot path: the script's promise, and its reply's parse.
      return ready ? acquireVia(ready, keys, token, ttl, queue) : connect().then((client) => acquireVia(client, keys, token, ttl, queue));
    },
    async acquireAll(keys, token, ttl): Promise<MultiAcquireReply | undefined> {

      // With replica acknowledgement every lease goes through acquire's WAIT; on Cluster the
      // locks' keys are in different slots (each name is its own hash tag): one by one, then.
      if (replication) return undefined;
      const client = ready ?? (await connect());
      if (client.cluster) return undefined;
      const reply = await runScript(client, multiAcquireScript, keys.flatMap((k) => [k.lock, k.fence]), [token, String(ttl), RETENTION]);
      if (Array.isArray(reply) && reply[0] === 1 && reply.length === keys.length + 1) {
        return { acquired: true, fences: reply.slice(1).map((fence) => asInteger(fence, multiAcquireScript)) };
      }
      if (Array.isArray(reply) && reply[0] === 0 && reply.length === 3) {
        return { acquired: false, busy: asInteger(reply[1], multiAcquireScript) - 1, ttl: asInteger(reply[2], multiAcquireScript) };
      }
      throw new BackendError('multiAcquire', `unexpected reply ${JSON.stringify(reply)}`);
    },
    release(keys, token, handOff): Promise<ReleaseReply> {
      const releasing = ready ? releaseOn(ready, keys, token, handOff) : connect().then((client) => releaseOn(client, keys, token, handOff));
      late.gaveBack(keys, token, backend); // once sent
      return releasing;
    },
    releaseAlone(keys, token, contended) {
      // One Redis, granting releases: release-key.lua with the queue key (two keys, one argument).
      // A Cluster client, Redlock's nodes, replica acknowledgement and semaphores release as usual.
      if (!ready || ready.cluster || wake || keys.semaphore) return backend.release(keys, token) as Promise<OwnershipReply>;
      const client = ready;
      const releasing = runScript(client, releaseKeyScript, [keys.lock, keys.queue], [token], (reply): OwnershipReply | Promise<OwnershipReply> => {
        const code = asInteger(reply, releaseKeyScript);
        if (code !== 2) return ownership(code, 'release');
        // Someone queued meanwhile: release.lua passes the lock on.
        contended();
        return releaseOn(client, keys, token) as Promise<OwnershipReply>;
      });
      late.gaveBack(keys, token, backend); // once sent
      return releasing;
    },
    async extend(keys, token, ttl) {
      const script = keys.semaphore ? semaphoreExtendScript : extendScript;
      const client = ready ?? (await connect());
      // A lock's renewal names its lock key alone (safe while a Cluster slot migrates); a
      // semaphore's, its holders set and permits hash, which exist together.
      const extendKeys = keys.semaphore ? [keys.lock, keys.holder] : [keys.lock];
      const args = [token, String(ttl)];
      if (!replication) return ownership(asInteger(await runScript(client, script, extendKeys, args), script), 'extend');
      // An extension the replicas did not acknowledge must not lengthen the lease: a replica
      // promoted now would expire the key on the older TTL while the holder counted the newer one.
      const [reply, acks] = await runScriptReplicated(client, script, extendKeys, args, replication.replicas, replication.timeout);
      const result = ownership(asInteger(reply, script), 'extend');
      if (result === 'ok' && acks < replication.replicas && replication.shortfall === 'fail') {
        throw new ReplicationError(keys.name, replication.replicas, acks, replication.timeout, 'extend');
      }
      return result;
    },
    async extendMany(items, onPart) {
      // Not with replica acknowledgement (each extend waits for its replicas); on a Cluster client, one call per slot.
      if (replication) return undefined;
      const client = ready ?? (await connect());
      return client.cluster ? extendManyBySlot(client, items, (item) => backend.extend(item.keys, item.token, item.ttl), onPart) : extendManyOn(client, items);
    },
    acquireWith(call) {
      // No async function and no await on the hot path: one promise per node, and the reply's parse.
      const run = (client: ScriptClient): Promise<AcquireReply> => runScript(client, acquireScript, call.keys, call.args, parseAcquire);
      return ready ? run(ready) : connect().then(run);
    },
    wakeReleaseCall(keys, token) {
      // The standalone form: a node on a Cluster client builds its own (releaseWith).
      const [keyList, args] = wakeRelease(undefined, keys, token);
      return { keys: keyList, args };
    },
    releaseWith(keys, token, call) {
      const run = (client: ScriptClient): Promise<ReleaseReply> =>
        client.cluster ? runScript(client, wakeReleaseScript, ...wakeRelease(client, keys, token), parseWakeRelease) : runScript(client, wakeReleaseScript, call.keys, call.args, parseWakeRelease);
      return ready ? run(ready) : connect().then(run);
    },
    async raiseFence(keys, fence, ttl) {
      await runScript(ready ?? (await connect()), raiseFenceScript, [keys.fence], [String(fence), counterTtl(ttl)]);
    },
    async leave(keys, member, token) {
      const leaving = leaveOn(keys, member, token);
      late.gaveBack(keys, token, backend);
      return leaving;
    },
    keepQueued(waiters, entryTtl) {
      const run = (client: ScriptClient): Promise<KeepReply[] | undefined> => {
        if (client.cluster) return keepQueuedBySlot(client, waiters, entryTtl);
        const call = keepQueuedCall(waiters, entryTtl, inboxes);
        return runScript(client, keepQueuedScript, call.keys, call.args, (reply) => keepReplies(reply, waiters.length));
      };
      return ready ? run(ready) : connect().then(run);
    },
    ...oneClientCalls(() => ready ?? connect()),
    async markForced(keys, token, ttl) {
      await runScript(ready ?? (await connect()), markForcedScript, [keys.lock, forcedKey(keys)], [token, String(ttl)]);
    },
    async wasForced(keys, token) {
      const reply = await runScript(ready ?? (await connect()), forcedTokenScript, [forcedKey(keys)], []);
      return reply !== null && reply !== undefined && String(reply) === token;
    },
    async inspect(keys) {
      const reply = await runScript(ready ?? (await connect()), inspectScript, [keys.lock, keys.fence, keys.queue], []);
      return asSnapshot(reply);
    },
    async lockNames(keyPrefix, pattern) {
      const client = ready ?? (await connect());
      try {
        return namesOf(await client.scan(`${escapeGlob(keyPrefix)}{${pattern}}`), keyPrefix);
      } catch (error) {
        // A page that got no reply (scanAll's bound): the server named, as every such error does.
        if (error instanceof UnreachableError) throw new UnreachableError('list', 'a page of SCAN', backend.server, error.waited, backend.lastError?.());
        throw new BackendError('scan', error instanceof Error ? error.message : String(error), { cause: error });
      }
    },
    async watchInbox(managerId, listener) {
      const client = ready ?? (await connect());
      return inboxCloser.open((signal) => (client.cluster ? openLockInbox(client, managerId, listener, undefined, signal) : openInbox(client, inboxes + managerId, listener, signal)));
    },
    async close() {
      await inboxCloser.closeAll(); // an inbox still opening ends too, its connection closed
      const c = ready ?? (await pending?.catch(() => undefined));
      await c?.close();
    },
  };
  return backend;
}
