/**
 * The fault harness: Redis nodes (real redis-server processes), one fault proxy per worker per
 * node, a fault-free Redis for the protected resources, and worker processes (test/faults/worker.mjs)
 * whose events, with the harness's own, make one history on the machine's monotonic clock.
 *
 * Everything it starts it stops by pid (`close()`).
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { RedisServer } from '../helpers/redis-server.js';
import { Worker, type WorkerOptions } from './fault-worker.js';
import { History } from './history.js';
import { FaultProxy } from './proxy.js';

const WORKER = fileURLToPath(new URL('./worker.mjs', import.meta.url));

export interface RigOptions {
  /** How many Redis nodes: 1 is a single Redis, more is Redlock over them. Default 1. */
  readonly nodes?: number;
  /** Lock nodes keep their data across restarts (AOF, fsync always). Default false. */
  readonly persistence?: boolean;
  /** Extra redis-server arguments for the lock nodes (e.g. a maxmemory-policy). */
  readonly nodeArgs?: readonly string[];
  /**
   * Node 0 gets a replica, linked to it through a fault proxy of its own so that the link can be
   * cut (`cutReplica`); `failover()` promotes it. Single Redis only. Default false.
   */
  readonly replica?: boolean;
}

/** The lock nodes, the resource Redis, the workers and their proxies, and the history. */
export class FaultRig {
  readonly nodes: RedisServer[];
  /** The fault-free Redis that holds the protected resources. */
  readonly resourceServer: RedisServer;
  readonly resource: Redis;
  readonly history = new History();
  readonly prefix = `f${randomBytes(4).toString('hex')}:`;
  readonly key = 'job';
  readonly fencedKey: string;
  readonly counterKey: string;
  readonly workers: Worker[] = [];
  readonly #proxies: FaultProxy[] = [];
  /** Plain connections to the lock nodes (not through any proxy), for server faults; made on demand. */
  readonly #admins = new Map<string, Redis>();
  /** The replica of node 0 and the proxy its replication link goes through (option `replica`). */
  replica: { readonly server: RedisServer; readonly link: FaultProxy } | undefined;
  /** The server each node index leads to now: node 0 changes with each `failover()`. */
  readonly #current: RedisServer[];
  /** Servers started after the rig (replicas), stopped with it. */
  readonly #extra: RedisServer[] = [];

  private constructor(nodes: RedisServer[], resourceServer: RedisServer) {
    this.nodes = nodes;
    this.#current = [...nodes];
    this.resourceServer = resourceServer;
    this.resource = new Redis(resourceServer.port, '127.0.0.1');
    this.fencedKey = `${this.prefix}resource`;
    this.counterKey = `${this.prefix}counter`;
  }

  static async start(options: RigOptions = {}): Promise<FaultRig> {
    const count = options.nodes ?? 1;
    const args = [...(options.nodeArgs ?? []), ...(options.replica ? ['--repl-diskless-sync-delay', '0'] : [])];
    const servers = await Promise.all([
      ...Array.from({ length: count }, () => RedisServer.start({ persistence: options.persistence ?? false, args })),
      RedisServer.start(),
    ]);
    const resourceServer = servers.pop()!;
    const rig = new FaultRig(servers, resourceServer);
    if (options.replica) await rig.addReplica();
    return rig;
  }

  /** The server node `index` leads to now (node 0 after a failover: the promoted replica). */
  current(index: number): RedisServer {
    return this.#current[index]!;
  }

  /** A plain connection to lock node `index` ('replica': the replica) as it is now, not through any proxy. */
  admin(index: number | 'replica'): Redis {
    const port = index === 'replica' ? this.replica!.server.port : this.current(index).port;
    let client = this.#admins.get(String(port));
    if (!client) {
      client = new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 1 });
      client.on('error', () => {});
      this.#admins.set(String(port), client);
    }
    return client;
  }

  /**
   * Starts a replica of node 0 (as it is now), linked through a fault proxy of its own so that
   * the link can be cut, and resolves once it has synced.
   */
  async addReplica(): Promise<void> {
    const link = await FaultProxy.start(this.current(0).port);
    this.#proxies.push(link);
    const server = await RedisServer.start({ args: ['--replicaof', '127.0.0.1', String(link.port), '--repl-diskless-sync-delay', '0'] });
    this.#extra.push(server);
    this.replica = { server, link };
    // WAIT returns once the replica has acknowledged the write before it. Twice: a write made
    // before the full sync is in the snapshot (its offset is 0, so WAIT counts the replica as soon
    // as it is there); the second one, after it, proves that the stream flows.
    const primary = this.admin(0);
    for (const round of ['1', '2']) {
      await primary.set(`${this.prefix}sync`, round);
      const acked = Number(await primary.call('WAIT', '1', '15000'));
      if (acked !== 1) throw new Error('the replica did not sync within 15 s');
    }
    if ((await this.admin('replica').get(`${this.prefix}sync`)) !== '2') throw new Error('the replica acknowledged without the write');
  }

  /** Cuts the replication link (a partition between primary and replica): writes stop reaching the replica. */
  cutReplica(): void {
    this.history.note('fault', { kind: 'cut-replica' });
    this.replica!.link.blackHole();
  }

  /** Mends the link: the replica catches up (or, with `reset`, reconnects and resyncs). */
  healReplica(options: { reset?: boolean } = {}): void {
    this.replica!.link.heal(options);
    this.history.note('heal', { kind: 'cut-replica' });
  }

  /**
   * A failover as Sentinel makes it: the replica is promoted (REPLICAOF NO ONE), every worker's
   * proxy to node 0 now leads to it (their open connections are reset, the clients reconnect),
   * and the old primary is killed. The rig has no replica after it (see `addReplica`).
   */
  async failover(): Promise<void> {
    const replica = this.replica!;
    const old = this.current(0);
    this.history.note('fault', { kind: 'failover' });
    await this.admin('replica').call('REPLICAOF', 'NO', 'ONE');
    this.#current[0] = replica.server;
    this.replica = undefined;
    for (const worker of this.workers) worker.proxies[0]!.retarget(replica.server.port);
    replica.link.heal({ reset: true });
    await old.kill();
    this.history.note('heal', { kind: 'failover' });
  }

  /** CLIENT PAUSE `ms` ALL on node `index`: the server answers nobody (and expires no key) meanwhile. */
  async clientPause(index: number, ms: number): Promise<void> {
    this.history.note('fault', { kind: 'client-pause', node: index, ms });
    await this.admin(index).call('CLIENT', 'PAUSE', String(ms), 'ALL');
  }

  /** DEBUG SLEEP on node `index` for `ms`: resolves when the server answers again. */
  async debugSleep(index: number, ms: number): Promise<void> {
    this.history.note('fault', { kind: 'debug-sleep', node: index, ms });
    // Its own connection: DEBUG SLEEP holds the connection it came on until the server wakes.
    const sleeper = new Redis(this.current(index).port, '127.0.0.1', { maxRetriesPerRequest: 1 });
    sleeper.on('error', () => {});
    try {
      await sleeper.call('DEBUG', 'SLEEP', (ms / 1000).toFixed(3));
    } finally {
      sleeper.disconnect();
    }
    this.history.note('heal', { kind: 'debug-sleep', node: index });
  }

  /**
   * Fills node `index` under its maxmemory (with an evicting policy) until the key `until` is
   * evicted, or `maxWrites` writes of `size` bytes were made; resolves with whether it was.
   * Each filler key has a TTL, so volatile-* policies may evict them too.
   */
  async fillUntilEvicted(index: number, until: string, options: { size?: number; maxWrites?: number } = {}): Promise<boolean> {
    const admin = this.admin(index);
    const value = 'x'.repeat(options.size ?? 32_768);
    this.history.note('fault', { kind: 'evict', node: index });
    let evicted = false;
    let writes = 0;
    while (writes < (options.maxWrites ?? 4_000) && !evicted) {
      // A write refused (OOM) when nothing more can be evicted ends the fill.
      const ok = await admin.set(`${this.prefix}filler:${writes++}`, value, 'PX', 60_000).then(() => true, () => false);
      evicted = (await admin.exists(until)) === 0;
      if (!ok) break;
    }
    this.history.note('heal', { kind: 'evict', node: index, evicted, writes });
    return evicted;
  }

  /** Starts a worker with its own proxy to each node. */
  async spawnWorker(id: string, options: WorkerOptions): Promise<Worker> {
    const proxies = await Promise.all(this.#current.map((node) => FaultProxy.start(node.port)));
    this.#proxies.push(...proxies);
    const config = {
      id,
      urls: proxies.map((p) => p.url),
      resourceUrl: this.resourceServer.url,
      prefix: this.prefix,
      key: this.key,
      resource: this.fencedKey,
      counter: this.counterKey,
      ...options,
      ...(options.holdUntilTold ? { holdUntil: this.#holdKey(id) } : {}),
    };
    const child = spawn(process.execPath, [WORKER, JSON.stringify(config)], { stdio: ['ignore', 'pipe', 'pipe'] });
    const worker = new Worker(id, child, proxies, this.history);
    this.workers.push(worker);
    await this.history.waitFor((e) => e.p === id && (e.ev === 'started' || e.ev === 'exit'), 15_000, `${id} to start`);
    return worker;
  }

  /**
   * Memory pressure on node `index`: an evicting policy and a maxmemory a little above what it
   * uses, filled until the key `until` is evicted (see `fillUntilEvicted`); then the filler is
   * deleted and the node is back to noeviction without a limit. Resolves with whether it was.
   */
  async evict(index: number, until: string, policy: 'allkeys-lru' | 'volatile-lru'): Promise<boolean> {
    const admin = this.admin(index);
    const used = Number(/used_memory:(\d+)/.exec(await admin.info('memory'))?.[1] ?? 0);
    await admin.config('SET', 'maxmemory-policy', policy);
    await admin.config('SET', 'maxmemory', String(used + 1024 * 1024));
    try {
      return await this.fillUntilEvicted(index, until, { maxWrites: 1_000 });
    } finally {
      await admin.config('SET', 'maxmemory', '0');
      await admin.config('SET', 'maxmemory-policy', 'noeviction');
      const fillers = await admin.keys(`${this.prefix}filler:*`);
      if (fillers.length > 0) await admin.unlink(...fillers);
    }
  }

  /** Kills a lock node and starts it again on its port: with its data only if the rig persists. */
  async restartNode(index: number): Promise<void> {
    const node = this.nodes[index]!;
    this.history.note('fault', { kind: 'restart-node', node: index });
    await node.restart();
    this.history.note('heal', { kind: 'restart-node', node: index });
  }

  /** Ends the current hold of worker `id`, spawned with `holdUntilTold` (its next hold, if it is not holding yet). */
  async endHold(id: string): Promise<void> {
    await this.resource.lpush(this.#holdKey(id), 'go');
  }

  /** The list a worker spawned with `holdUntilTold` waits on while it holds (BLPOP), on the resource server. */
  #holdKey(id: string): string {
    return `${this.prefix}hold:${id}`;
  }

  /** The fenced resource's value and fence as Redis holds them (`fencedWrite` stores a hash). */
  async fencedState(): Promise<{ value: string | null; fence: number | null }> {
    const hash = await this.resource.hgetall(this.fencedKey);
    return { value: hash.value ?? null, fence: hash.fence === undefined ? null : Number(hash.fence) };
  }

  async close(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.stop()));
    await Promise.all(this.#proxies.map((p) => p.stop()));
    this.resource.disconnect();
    for (const client of this.#admins.values()) client.disconnect();
    await Promise.all([...this.nodes, this.resourceServer, ...this.#extra].map((s) => s.stop()));
  }
}
