/**
 * The soak's cluster mode (random.soak.ts): a local Redis Cluster of 3 masters with one replica
 * each (test/helpers/redis-cluster.ts), looping workers (worker.mjs with `cluster: true`: one
 * ioredis Cluster client each), a fault-free Redis for the protected resources, one history, and
 * the cluster's own faults, aimed at the master that owns the workers' lock slot:
 *
 * - `failover`: a graceful `CLUSTER FAILOVER` on its replica (the master hands over; no write lost);
 * - `failover-force`: the master frozen (SIGSTOP) or killed, `CLUSTER FAILOVER FORCE` on its
 *   replica, then the old master resumed or restarted (empty) so that it rejoins as the new
 *   master's replica. Replication is asynchronous: what the replica had not received is lost, and
 *   a frozen master that resumes runs the commands queued in its sockets before it learns it was
 *   demoted (writes that are lost too). Data-losing;
 * - `reshard`: the lock's slot moved to another master the way `redis-cli --cluster reshard` does
 *   (SETSLOT IMPORTING on the target, MIGRATING on the source, an optional dwell in that state,
 *   MIGRATE of the slot's keys, SETSLOT NODE on every master). Not data-losing.
 *
 * The workers connect to the nodes directly, not through fault proxies: the cluster answers with
 * node addresses (CLUSTER SLOTS, MOVED, ASK) that a proxy per node would have to rewrite (ioredis's
 * `natMap` could map them; not done), and the faults of this mode are the topology's, not the
 * network's. Worker-side faults (kill, pause) work as in the other modes.
 *
 * Everything it starts it stops by pid (`close()`).
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { lockKeys } from '../../src/keys.js';
import { startMigration } from '../helpers/cluster-migration.js';
import { RedisCluster, type ClusterNode } from '../helpers/redis-cluster.js';
import { RedisServer } from '../helpers/redis-server.js';
import { Worker, type WorkerOptions } from './fault-worker.js';
import { History } from './history.js';

const WORKER = fileURLToPath(new URL('./worker.mjs', import.meta.url));

/** CLUSTER SLOTS: [[start, end, [host, port, id, ...], ...replicas], ...] */

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A master votes for the failover of a given master once per twice the node timeout (1 s in the
 * harness); a second failover of the same master sooner is refused its votes, and a manual one
 * then gives up after 5 s. The rig leaves this long between failovers.
 */
const FAILOVER_SPACING_MS = 2_500;

export class ClusterRig {
  readonly cluster: RedisCluster;
  /** The fault-free Redis that holds the protected resources. */
  readonly resourceServer: RedisServer;
  readonly resource: Redis;
  readonly history = new History();
  readonly prefix = `f${randomBytes(4).toString('hex')}:`;
  readonly key = 'job';
  readonly fencedKey: string;
  readonly counterKey: string;
  /** The lock's key: every key of the lock shares its hash tag, so this names the lock's slot. */
  readonly lockKey: string;
  readonly workers: Worker[] = [];
  /** When the last failover ended (performance.now()). */
  #lastFailover = -Infinity;

  private constructor(cluster: RedisCluster, resourceServer: RedisServer) {
    this.cluster = cluster;
    this.resourceServer = resourceServer;
    this.resource = new Redis(resourceServer.port, '127.0.0.1');
    this.fencedKey = `${this.prefix}resource`;
    this.counterKey = `${this.prefix}counter`;
    this.lockKey = lockKeys(this.prefix, this.key).lock;
  }

  static async start(): Promise<ClusterRig> {
    const [cluster, resourceServer] = await Promise.all([RedisCluster.start({ masters: 3, replicasPerMaster: 1 }), RedisServer.start()]);
    return new ClusterRig(cluster, resourceServer);
  }

  /** The master that serves the lock's slot now. */
  lockMaster(): Promise<ClusterNode> {
    return this.cluster.masterForKey(this.lockKey);
  }

  /** Starts a worker whose ioredis Cluster client knows every node as a startup node. */
  async spawnWorker(id: string, options: WorkerOptions): Promise<Worker> {
    const config = {
      id,
      cluster: true,
      urls: this.cluster.urls,
      resourceUrl: this.resourceServer.url,
      prefix: this.prefix,
      key: this.key,
      resource: this.fencedKey,
      counter: this.counterKey,
      ...options,
    };
    const child = spawn(process.execPath, [WORKER, JSON.stringify(config)], { stdio: ['ignore', 'pipe', 'pipe'] });
    const worker = new Worker(id, child, [], this.history);
    this.workers.push(worker);
    await this.history.waitFor((e) => e.p === id && (e.ev === 'started' || e.ev === 'exit'), 15_000, `${id} to start`);
    return worker;
  }

  /** A graceful `CLUSTER FAILOVER` of the lock's master; resolves once the cluster is healthy again. */
  async failover(): Promise<void> {
    await this.#spaceFailovers();
    const master = await this.lockMaster();
    this.history.note('fault', { kind: 'failover', node: master.port });
    const promoted = await this.cluster.failover(master, { mode: 'default' }).catch(async (error: unknown) => {
      throw new Error(`${error instanceof Error ? error.message : String(error)}; ${await this.#describe(master)}`);
    });
    await this.cluster.waitUntilHealthy();
    this.#lastFailover = performance.now();
    this.history.note('heal', { kind: 'failover', node: master.port, promoted: promoted.port });
  }

  /**
   * A forced failover of the lock's master: frozen (`pause`, for `frozenMs` before the FORCE) or
   * killed, its replica promoted with `CLUSTER FAILOVER FORCE`, then the old master resumed or
   * restarted; resolves once it is the new master's replica and the cluster is healthy. The heal
   * is noted then: until it, the old master may still take writes that will be lost.
   */
  async forcedFailover(how: 'pause' | 'kill', frozenMs = 0): Promise<void> {
    await this.#spaceFailovers();
    const master = await this.lockMaster();
    this.history.note('fault', { kind: 'failover-force', node: master.port, how });
    if (how === 'pause') master.pause();
    else await master.kill();
    if (frozenMs > 0) await sleep(frozenMs);
    try {
      const promoted = await this.cluster.failover(master, { mode: 'force' });
      this.history.note('promoted', { kind: 'failover-force', node: master.port, promoted: promoted.port });
    } finally {
      if (how === 'pause') master.resume();
      else await master.restart();
    }
    this.#lastFailover = performance.now();
    await this.cluster.waitUntilHealthy();
    this.history.note('heal', { kind: 'failover-force', node: master.port, how });
  }

  /**
   * Moves the lock's slot, keys included, from its master to `target` (another master): SETSLOT
   * IMPORTING on the target, MIGRATING on the source, `dwellMs` in that state (a slow migration:
   * keys of the slot created meanwhile go to the target, through ASK), MIGRATE of the slot's keys
   * in batches, then SETSLOT NODE on the target, the source and the other masters. Resolves once
   * every answering node routes the slot to the target: test/helpers/cluster-migration.ts's
   * startMigration and finish, with the dwell between them.
   */
  async reshard(pickTarget: (others: readonly ClusterNode[]) => ClusterNode, dwellMs = 0): Promise<void> {
    await this.cluster.refreshTopology();
    const source = await this.lockMaster();
    const target = pickTarget(this.cluster.masters.filter((m) => m !== source));
    const slot = Number(await source.call('CLUSTER', 'KEYSLOT', this.lockKey));
    this.history.note('fault', { kind: 'reshard', slot, from: source.port, to: target.port, dwellMs });
    const migration = await startMigration(this.cluster, this.lockKey, target);
    if (dwellMs > 0) await sleep(dwellMs);
    await migration.finish();
    this.history.note('heal', { kind: 'reshard', slot, from: source.port, to: target.port });
  }

  async #spaceFailovers(): Promise<void> {
    const wait = this.#lastFailover + FAILOVER_SPACING_MS - performance.now();
    if (wait > 0) await sleep(wait);
  }

  /** What the nodes say of `master` and its replica, for an error message. */
  async #describe(master: ClusterNode): Promise<string> {
    const replica = this.cluster.replicaOf(master);
    const say = async (node: ClusterNode | undefined, ...args: string[]): Promise<string> =>
      node ? String(await node.call(...args).catch((e: unknown) => String(e))).replace(/\r?\n/g, ' | ') : 'none';
    return [
      `master ${master.port} replication: ${await say(master, 'INFO', 'replication')}`,
      `replica ${replica?.port} replication: ${await say(replica, 'INFO', 'replication')}`,
      `replica's CLUSTER NODES: ${await say(replica, 'CLUSTER', 'NODES')}`,
    ].join('; ');
  }

  async close(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.stop()));
    this.resource.disconnect();
    await Promise.all([this.cluster.stop(), this.resourceServer.stop()]);
  }
}

export const CLUSTER_FAULTS = ['failover', 'failover-force', 'reshard'] as const;
export type ClusterFault = (typeof CLUSTER_FAULTS)[number];

/**
 * Injects one cluster fault with parameters drawn from `random` (the soak's seeded generator):
 * a forced failover freezes (for up to `ttl` ms before the FORCE) or kills the master, half and
 * half; a reshard dwells in MIGRATING for 0 (half of them) or 200–3000 ms (a slow migration, past
 * the ~1.6 s a client retries TRYAGAIN).
 */
export async function clusterFault(rig: ClusterRig, kind: ClusterFault, random: () => number, ttl: number): Promise<void> {
  const between = (lo: number, hi: number): number => Math.round(lo + random() * (hi - lo));
  switch (kind) {
    case 'failover':
      return rig.failover();
    case 'failover-force': {
      const how = random() < 0.5 ? 'pause' : 'kill';
      return rig.forcedFailover(how, how === 'pause' ? between(0, ttl) : 0);
    }
    case 'reshard': {
      const pickIndex = random();
      const dwell = random() < 0.5 ? 0 : between(200, 3_000);
      return rig.reshard((others) => others[Math.floor(pickIndex * others.length)]!, dwell);
    }
  }
}
