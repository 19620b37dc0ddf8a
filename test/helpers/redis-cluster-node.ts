/**
 * One node of the test Redis Cluster (redis-cluster.ts): its redis-server process, on a loopback
 * port pair found free, in its own temporary directory, killed, paused, resumed and restarted by
 * pid; the short-lived connection each command to it goes over; and the exit hook that kills
 * every node still running when the test process exits.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { untilReady } from './redis-server.js';

export type ClusterNodeRole = 'master' | 'replica';

/** The loopback address every node binds to. */
export const HOST = '127.0.0.1';

/** Every child started here, so that a crashing test process does not leave servers behind. */
const running = new Set<ChildProcess>();
let exitHookInstalled = false;
function track(child: ChildProcess): void {
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.once('exit', () => {
      for (const c of running) c.kill('SIGKILL');
    });
  }
  running.add(child);
  child.once('exit', () => running.delete(child));
}

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, HOST, () => server.close(() => resolve(true)));
  });
}

/**
 * A port for a cluster node: the node also listens on port + 10000 (the cluster bus), so both must
 * be free. Ports come from 10000..22767 so that both the port and the bus port (20000..32767) lie
 * below Linux's ephemeral range (32768..60999) and cannot collide with outgoing connections or
 * with `freePort()` in other test files.
 */
export async function freeClusterPort(): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = 10000 + Math.floor(Math.random() * 12768);
    if ((await canListen(port)) && (await canListen(port + 10000))) return port;
  }
  throw new Error('no free port pair (port, port + 10000) found for a cluster node');
}

/** One short-lived connection per call: robust against killed and restarted nodes. */
async function command(port: number, args: readonly (string | number)[], timeoutMs = 1000): Promise<unknown> {
  const client = new Redis({
    host: HOST,
    port,
    lazyConnect: true,
    connectTimeout: timeoutMs,
    commandTimeout: timeoutMs,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    enableReadyCheck: false,
    retryStrategy: () => null,
  });
  client.on('error', () => {});
  try {
    await client.connect();
    const [name, ...rest] = args;
    return await client.call(String(name), ...rest.map(String));
  } finally {
    client.disconnect();
  }
}

export class ClusterNode {
  readonly host = HOST;
  readonly port: number;
  readonly dir: string;
  readonly #args: readonly string[];
  #child: ChildProcess | undefined;
  #paused = false;
  #role: ClusterNodeRole = 'master';
  #servesSlots = false;
  #id = '';
  /** When {@link RedisCluster.failover} last saw this node win an election (performance.now()). */
  electedAt: number | undefined;

  /** @internal */
  constructor(port: number, args: readonly string[]) {
    this.port = port;
    this.#args = args;
    this.dir = mkdtempSync(join(tmpdir(), `latchkey-cluster-${port}-`));
  }

  get pid(): number | undefined {
    return this.#child?.pid;
  }

  /**
   * Role as last seen by the harness (after start, failover, `waitUntilHealthy()` and
   * `refreshTopology()`). A killed master stays 'master' (Redis lists it as a failed master) even
   * once its replica has taken its slots; see `servesSlots`.
   */
  get role(): ClusterNodeRole {
    return this.#role;
  }

  /** Whether the cluster assigned slots to this node at the last topology read. */
  get servesSlots(): boolean {
    return this.#servesSlots;
  }

  /** Cluster node id (40 hex characters). */
  get id(): string {
    return this.#id;
  }

  get url(): string {
    return `redis://${HOST}:${this.port}`;
  }

  /** The process is running (possibly paused). */
  get running(): boolean {
    const child = this.#child;
    return child !== undefined && child.exitCode === null && child.signalCode === null;
  }

  get paused(): boolean {
    return this.#paused;
  }

  /** Running and not paused: it can answer. */
  get answering(): boolean {
    return this.running && !this.#paused;
  }

  /** Runs one command on this node over a fresh connection, e.g. `node.call('CLUSTER', 'INFO')`. */
  call(...args: Array<string | number>): Promise<unknown> {
    return command(this.port, args);
  }

  /** As {@link call}, for a command that may wait on the node (a write while it is paused) up to `timeoutMs`. */
  callWithin(timeoutMs: number, ...args: Array<string | number>): Promise<unknown> {
    return command(this.port, args, timeoutMs);
  }

  /** SIGKILL: the node dies at once. With replicas, its replica takes over after ~1-2 s (node timeout 1000 ms). */
  async kill(): Promise<void> {
    this.resume();
    const child = this.#child;
    if (!child || !this.running) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGKILL');
    await exited;
    this.#child = undefined;
  }

  /** SIGSTOP: the node freezes. Paused longer than the node timeout (1 s), it is failed over if it has a replica. */
  pause(): void {
    if (!this.running) return;
    this.#child?.kill('SIGSTOP');
    this.#paused = true;
  }

  resume(): void {
    if (!this.#paused) return;
    this.#child?.kill('SIGCONT');
    this.#paused = false;
  }

  /** Kills the node and starts it again on the same port and directory (same nodes.conf, empty data). */
  async restart(): Promise<void> {
    await this.kill();
    await this.spawn();
  }

  /** @internal */
  setTopology(id: string, role: ClusterNodeRole, servesSlots: boolean): void {
    this.#id = id;
    this.#role = role;
    this.#servesSlots = servesSlots;
  }

  /** @internal */
  spawn(): Promise<void> {
    const args = [
      '--port', String(this.port),
      '--bind', HOST,
      '--dir', this.dir,
      '--logfile', '',
      '--cluster-enabled', 'yes',
      '--cluster-config-file', join(this.dir, `nodes-${this.port}.conf`),
      '--cluster-node-timeout', '1000',
      '--appendonly', 'no',
      '--save', '',
      '--enable-debug-command', 'local',
      // Replicas sync at once instead of after the default 5 s wait for more replicas to join.
      '--repl-diskless-sync-delay', '0',
      ...this.#args,
    ];
    const child = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    this.#child = child;
    this.#paused = false;
    track(child);
    return untilReady(child, `redis-server (cluster node) on port ${this.port}`, () => (this.#child = undefined));
  }

  /** @internal */
  async stop(): Promise<void> {
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export async function startNode(args: readonly string[]): Promise<ClusterNode> {
  for (let attempt = 0; ; attempt++) {
    const node = new ClusterNode(await freeClusterPort(), args);
    try {
      await node.spawn();
      return node;
    } catch (error) {
      await node.stop();
      if (attempt >= 4) throw error;
    }
  }
}
