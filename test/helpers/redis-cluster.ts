/**
 * Starts a real local Redis Cluster for tests: one redis-server process per node, on loopback
 * ports, each in its own temporary directory, joined with `redis-cli --cluster create`. Like
 * `RedisServer`, it stops only the processes it started, by pid, and nodes can be killed, paused,
 * resumed and restarted on the same port (a restarted node keeps its nodes.conf, so it rejoins
 * with the same id; its data is gone, since nothing is persisted).
 *
 * Waiting for the cluster polls `CLUSTER INFO` / `CLUSTER SLOTS` / `INFO replication`: no event
 * announces that the nodes agree on the topology.
 *
 * Each node and its process are a ClusterNode (test/helpers/redis-cluster-node.ts, re-exported
 * here with freeClusterPort); the replies it reads are parsed in redis-cluster-replies.ts.
 */
import { execFile } from 'node:child_process';
import { ClusterNode, HOST, startNode } from './redis-cluster-node.js';
import { parseClusterNodes, type NodeLine, type SlotsReply } from './redis-cluster-replies.js';
import { parseInfo } from './redis-server.js';

export { ClusterNode, freeClusterPort, type ClusterNodeRole } from './redis-cluster-node.js';

export interface RedisClusterOptions {
  /** Number of masters; the 16384 slots are split evenly between them. Default 3 (the minimum redis-cli accepts). */
  readonly masters?: number;
  /** Replicas per master. Default 0. */
  readonly replicasPerMaster?: 0 | 1;
  /** Extra redis-server arguments for every node, e.g. ['--maxmemory', '10mb']. */
  readonly args?: readonly string[];
  /** How long to wait for the cluster to converge after creation. Default 15 000 ms. */
  readonly readyTimeoutMs?: number;
}

export interface FailoverOptions {
  /**
   * `default`: CLUSTER FAILOVER (coordinated with the master; no writes lost), used when the
   * master is running and not paused. `force`: CLUSTER FAILOVER FORCE (no handshake with the
   * master, still elected by the other masters), used when the master is killed or paused.
   * `takeover`: CLUSTER FAILOVER TAKEOVER (no election at all).
   */
  readonly mode?: 'default' | 'force' | 'takeover';
  /** Default 10 000 ms. */
  readonly timeoutMs?: number;
}

export interface HostPort {
  readonly host: string;
  readonly port: number;
}

const SLOTS = 16384;
const POLL_MS = 50;

/** 4 × the nodes' `cluster-node-timeout` (1000 ms), and a little more: how long Redis keeps a replica's election state. */
const ELECTION_RETRY_MS = 4200;
/** When a graceful failover not yet done is asked again, ms (Redis's manual failover times out after 5 s). */
const MANUAL_FAILOVER_RETRY_MS = 5_500;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export class RedisCluster {
  readonly nodes: readonly ClusterNode[];
  readonly #readyTimeoutMs: number;
  /** replica -> its master, from the last CLUSTER NODES read. */
  readonly #masterOf = new Map<ClusterNode, ClusterNode>();

  private constructor(nodes: readonly ClusterNode[], readyTimeoutMs: number) {
    this.nodes = nodes;
    this.#readyTimeoutMs = readyTimeoutMs;
  }

  /**
   * Starts `masters * (1 + replicasPerMaster)` nodes, creates the cluster and waits until every
   * node reports `cluster_state:ok` with all 16384 slots assigned and every replica is in sync.
   */
  static async start(options: RedisClusterOptions = {}): Promise<RedisCluster> {
    const masters = options.masters ?? 3;
    const replicasPerMaster = options.replicasPerMaster ?? 0;
    if (masters < 3) throw new Error('redis-cli --cluster create needs at least 3 masters');
    const count = masters * (1 + replicasPerMaster);
    const started = await Promise.allSettled(Array.from({ length: count }, () => startNode(options.args ?? [])));
    const nodes = started.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    const failed = started.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) {
      await Promise.all(nodes.map((n) => n.stop()));
      throw failed.reason;
    }
    const cluster = new RedisCluster(nodes, options.readyTimeoutMs ?? 15_000);
    try {
      await runRedisCli([
        '--cluster', 'create',
        ...nodes.map((n) => `${HOST}:${n.port}`),
        '--cluster-replicas', String(replicasPerMaster),
        '--cluster-yes',
      ]);
      await cluster.waitUntilHealthy();
      return cluster;
    } catch (error) {
      await cluster.stop();
      throw error;
    }
  }

  /** Masters serving slots (a killed master whose slots moved to its replica is left out). */
  get masters(): ClusterNode[] {
    return this.nodes.filter((n) => n.role === 'master' && n.servesSlots);
  }

  get replicas(): ClusterNode[] {
    return this.nodes.filter((n) => n.role === 'replica');
  }

  /** For ioredis: `new Cluster(cluster.startupNodes)`. */
  get startupNodes(): HostPort[] {
    return this.nodes.map((n) => ({ host: n.host, port: n.port }));
  }

  /** For node-redis: `createCluster({ rootNodes: cluster.rootNodes })`. */
  get rootNodes(): Array<{ url: string }> {
    return this.nodes.map((n) => ({ url: n.url }));
  }

  get urls(): string[] {
    return this.nodes.map((n) => n.url);
  }

  nodeByPort(port: number): ClusterNode | undefined {
    return this.nodes.find((n) => n.port === port);
  }

  /** The replica of `master` as last seen by the harness (`refreshTopology()` updates it). */
  replicaOf(master: ClusterNode): ClusterNode | undefined {
    return this.nodes.find((n) => n.role === 'replica' && this.#masterOf.get(n) === master);
  }

  /** The master serving `key` now, asked of a live node (CLUSTER KEYSLOT, then CLUSTER SLOTS). */
  async masterForKey(key: string): Promise<ClusterNode> {
    const asked = this.#anyAnswering();
    const slot = Number(await asked.call('CLUSTER', 'KEYSLOT', key));
    const slots = (await asked.call('CLUSTER', 'SLOTS')) as SlotsReply;
    const range = slots.find(([start, end]) => slot >= start && slot <= end);
    if (!range) throw new Error(`slot ${slot} of key ${JSON.stringify(key)} is not served (asked port ${asked.port})`);
    const node = this.nodeByPort(Number(range[2][1]));
    if (!node) throw new Error(`slot ${slot} is served by unknown port ${range[2][1]}`);
    return node;
  }

  /**
   * Reads ids, roles and replica links: each answering node's own view (CLUSTER MYID, ROLE), and
   * for killed or paused nodes, the view of an answering node (CLUSTER NODES).
   */
  async refreshTopology(): Promise<void> {
    const lines = parseClusterNodes(String(await this.#anyAnswering().call('CLUSTER', 'NODES')));
    const byId = new Map<string, ClusterNode>();
    const linesByNode = new Map<ClusterNode, NodeLine>();
    this.#masterOf.clear();
    for (const line of lines) {
      const node = this.nodeByPort(line.port);
      if (!node) continue;
      byId.set(line.id, node);
      linesByNode.set(node, line);
    }
    for (const [node, line] of linesByNode) {
      if (node.answering) continue;
      node.setTopology(line.id, line.role, line.servesSlots);
      const master = line.masterId === undefined ? undefined : byId.get(line.masterId);
      if (master && line.role === 'replica') this.#masterOf.set(node, master);
    }
    for (const node of this.nodes.filter((n) => n.answering)) {
      const id = String(await node.call('CLUSTER', 'MYID'));
      const [role, , masterPort] = (await node.call('ROLE')) as [string, string, number];
      node.setTopology(id, role === 'master' ? 'master' : 'replica', linesByNode.get(node)?.servesSlots ?? false);
      const master = role === 'master' ? undefined : this.nodeByPort(Number(masterPort));
      if (master) this.#masterOf.set(node, master);
    }
  }

  /**
   * Waits until every answering node reports cluster_state:ok, all slots assigned, knows every
   * node, and every answering replica has its replication link up.
   */
  async waitUntilHealthy(timeoutMs = this.#readyTimeoutMs): Promise<void> {
    await this.#until(timeoutMs, 'the cluster to become healthy', async () => {
      const live = this.nodes.filter((n) => n.answering);
      for (const node of live) {
        const info = parseInfo(String(await node.call('CLUSTER', 'INFO')));
        if (info.get('cluster_state') !== 'ok') return `port ${node.port}: cluster_state:${info.get('cluster_state')}`;
        if (info.get('cluster_slots_assigned') !== String(SLOTS)) return `port ${node.port}: cluster_slots_assigned:${info.get('cluster_slots_assigned')}`;
        if (info.get('cluster_slots_ok') !== String(SLOTS)) return `port ${node.port}: cluster_slots_ok:${info.get('cluster_slots_ok')}`;
        if (Number(info.get('cluster_known_nodes')) < this.nodes.length) return `port ${node.port}: cluster_known_nodes:${info.get('cluster_known_nodes')}`;
        const replication = parseInfo(String(await node.call('INFO', 'replication')));
        if (replication.get('role') === 'slave' && replication.get('master_link_status') !== 'up') {
          return `port ${node.port}: replica link ${replication.get('master_link_status')}`;
        }
      }
      return undefined;
    });
    await this.refreshTopology();
  }

  /**
   * Makes `master`'s replica take over its slots, and waits until every answering node reports the
   * replica as master of those slots and cluster_state:ok. Returns the promoted node. If the
   * replica has already taken over on its own (the master was killed or paused for more than the
   * node timeout), only waits.
   */
  async failover(master: ClusterNode, options: FailoverOptions = {}): Promise<ClusterNode> {
    const started = Date.now();
    const timeoutMs = options.timeoutMs ?? 15_000;
    const retries: NodeJS.Timeout[] = [];
    // The replica as the harness last saw it: if it took over on its own, CLUSTER NODES no longer links them.
    const cached = this.replicaOf(master);
    await this.refreshTopology();
    const replica = [this.replicaOf(master), cached].find((n) => n?.answering);
    if (!replica) throw new Error(`port ${master.port} has no answering replica to fail over to`);
    const ownedRanges = await this.#rangesOf([master, replica]);
    const mode = options.mode ?? (master.answering ? 'default' : 'force');
    if ((await this.#roleReportedBy(replica)) !== 'master') {
      // Redis 7.0 keeps a replica's election state for 4 node timeouts (auth_retry_time): asked
      // to fail over again within that, a replica that won an election claims the win at once
      // with its old epoch, loses the epoch collision and turns replica again ("Manual failover
      // timed out"). Seen with a graceful failover 1.9 s after the same node's previous one.
      const settled = (replica.electedAt ?? -Infinity) + ELECTION_RETRY_MS - performance.now();
      if (settled > 0) await new Promise((resolve) => setTimeout(resolve, settled));
      const args = mode === 'default' ? ['CLUSTER', 'FAILOVER'] : ['CLUSTER', 'FAILOVER', mode.toUpperCase()];
      await replica.call(...args);
      // Redis aborts a manual failover that has not completed in 5 s ("Manual failover timed out":
      // seen here under load, the replica never took over): once that is past, it is asked again.
      const retry = setTimeout(() => {
        void this.#roleReportedBy(replica)
          .then((role) => (role === 'master' ? undefined : replica.call(...args)))
          .catch(() => {});
      }, MANUAL_FAILOVER_RETRY_MS);
      retry.unref();
      retries.push(retry);
    }
    const remaining = (): number => Math.max(0, timeoutMs - (Date.now() - started));
    try {
      await this.#waitForTakeOver(remaining(), replica, master, ownedRanges);
    } finally {
      for (const retry of retries) clearTimeout(retry);
    }
    return replica;
  }

  async #waitForTakeOver(within: number, replica: ClusterNode, master: ClusterNode, ownedRanges: (readonly [number, number])[]): Promise<void> {
    await this.#until(within, `port ${replica.port} to take over from port ${master.port}`, async () => {
      if ((await this.#roleReportedBy(replica)) !== 'master') return `port ${replica.port} is not master yet`;
      if (master.answering && (await this.#roleReportedBy(master)) === 'master') return `port ${master.port} still reports itself master`;
      for (const node of this.nodes.filter((n) => n.answering)) {
        const slots = (await node.call('CLUSTER', 'SLOTS')) as SlotsReply;
        for (const [start, end] of ownedRanges) {
          for (const probe of [start, end]) {
            const range = slots.find(([s, e]) => probe >= s && probe <= e);
            if (!range || Number(range[2][1]) !== replica.port) return `port ${node.port} still routes slot ${probe} elsewhere`;
          }
        }
        const info = parseInfo(String(await node.call('CLUSTER', 'INFO')));
        if (info.get('cluster_state') !== 'ok') return `port ${node.port}: cluster_state:${info.get('cluster_state')}`;
      }
      return undefined;
    });
    replica.electedAt = performance.now();
    await this.refreshTopology();
  }

  /** Kills every process this cluster started and removes their directories. */
  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.stop()));
  }

  #anyAnswering(): ClusterNode {
    const node = this.nodes.find((n) => n.answering);
    if (!node) throw new Error('no cluster node is running and unpaused');
    return node;
  }

  /** Slot ranges served by any of `owners`, as an answering node sees them. */
  async #rangesOf(owners: readonly ClusterNode[]): Promise<Array<[number, number]>> {
    const ports = new Set(owners.map((n) => n.port));
    const slots = (await this.#anyAnswering().call('CLUSTER', 'SLOTS')) as SlotsReply;
    const ranges = slots.filter((r) => ports.has(Number(r[2][1]))).map(([s, e]) => [s, e] as [number, number]);
    if (ranges.length === 0) throw new Error(`ports ${[...ports].join(', ')} serve no slots`);
    return ranges;
  }

  async #roleReportedBy(node: ClusterNode): Promise<string> {
    const role = (await node.call('ROLE')) as [string, ...unknown[]];
    return role[0];
  }

  async #until(timeoutMs: number, what: string, check: () => Promise<string | undefined>): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let last = 'not checked yet';
    for (;;) {
      try {
        const pending = await check();
        if (pending === undefined) return;
        last = pending;
      } catch (error) {
        last = error instanceof Error ? error.message : String(error);
      }
      if (Date.now() >= deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last: ${last}`);
      await sleep(POLL_MS);
    }
  }
}

function runRedisCli(args: readonly string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('redis-cli', args, { timeout: 30_000 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`redis-cli ${args.join(' ')} failed: ${error.message}\n${stdout.slice(-1000)}\n${stderr.slice(-1000)}`));
      else resolve(stdout);
    });
  });
}
