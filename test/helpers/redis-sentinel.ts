/**
 * A Sentinel group for tests: a primary, two replicas and one sentinel (quorum 1), real processes
 * on free loopback ports, stopped by pid. The sentinel's log is kept, so a test can wait for one
 * of its events (`+switch-master`, `+convert-to-slave`) as it is logged.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import { rawClient } from './harness.js';
import { freePort, parseInfo, RedisServer } from './redis-server.js';

/** The name the sentinel monitors the group under. */
export const GROUP = 'main';

/** Polls until `check` holds: replication and Sentinel's view change with no event a client can wait for. */
export async function until(check: () => Promise<boolean>, what: string, ms = 15_000): Promise<void> {
  const end = performance.now() + ms;
  while (!(await check().catch(() => false))) {
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export interface SentinelGroupOptions {
  /** Sentinel's down-after-milliseconds: how long a silent primary has before it is failed over. Default 300. */
  readonly downAfter?: number;
}

export class SentinelGroup {
  /** The primary the group started with, then its two replicas. */
  readonly servers: readonly RedisServer[];
  readonly sentinelPort: number;
  readonly #sentinel: ChildProcess;
  readonly #dir: string;
  readonly #lines: string[];
  /** Called on each line the sentinel logs. */
  readonly #listeners: Set<() => void>;
  readonly #ask: Redis;

  private constructor(servers: RedisServer[], sentinelPort: number, sentinel: ChildProcess, dir: string, lines: string[], listeners: Set<() => void>) {
    this.servers = servers;
    this.sentinelPort = sentinelPort;
    this.#sentinel = sentinel;
    this.#dir = dir;
    this.#lines = lines;
    this.#listeners = listeners;
    this.#ask = new Redis(sentinelPort, '127.0.0.1');
    this.#ask.on('error', () => {});
  }

  static async start(options: SentinelGroupOptions = {}): Promise<SentinelGroup> {
    const primary = await RedisServer.start({ args: ['--repl-diskless-sync-delay', '0'] });
    // Two replicas: after a failover the new primary still has one.
    const replicaArgs = { args: ['--replicaof', '127.0.0.1', String(primary.port), '--repl-diskless-sync-delay', '0'] };
    const replicas = await Promise.all([RedisServer.start(replicaArgs), RedisServer.start(replicaArgs)]);
    for (const server of replicas) {
      const raw = rawClient(server);
      await until(async () => /master_link_status:up/.test(await raw.info('replication')), 'the replicas to sync');
      raw.disconnect();
    }
    const dir = mkdtempSync(join(tmpdir(), 'latchkey-sentinel-'));
    const port = await freePort();
    const config = join(dir, 'sentinel.conf');
    writeFileSync(
      config,
      [
        `port ${port}`,
        'bind 127.0.0.1',
        `dir ${dir}`,
        `sentinel monitor ${GROUP} 127.0.0.1 ${primary.port} 1`,
        `sentinel down-after-milliseconds ${GROUP} ${options.downAfter ?? 300}`,
        `sentinel failover-timeout ${GROUP} 3000`,
        '',
      ].join('\n'),
    );
    const sentinel = spawn('redis-server', [config, '--sentinel'], { stdio: ['ignore', 'pipe', 'pipe'] });
    sentinel.stderr!.resume();
    const lines: string[] = [];
    const listeners = new Set<() => void>();
    const reader = createInterface({ input: sentinel.stdout! });
    // Ready once it monitors the primary and has found both replicas.
    await new Promise<void>((resolve, reject) => {
      sentinel.once('exit', (code) => reject(new Error(`sentinel exited with ${code}`)));
      let found = 0;
      reader.on('line', (line) => {
        lines.push(line);
        if (line.includes('+slave ') && ++found === 2) resolve();
        for (const listener of listeners) listener();
      });
    });
    return new SentinelGroup([primary, ...replicas], port, sentinel, dir, lines, listeners);
  }

  /** How many lines the sentinel logged so far: pass it to {@link SentinelGroup.logged} to look only at later ones. */
  mark(): number {
    return this.#lines.length;
  }

  /** The lines the sentinel logged from `since` on (see {@link SentinelGroup.mark}): for a failure's message. */
  loggedSince(since: number): string[] {
    return this.#lines.slice(since);
  }

  /** Each server's replication state as its `INFO replication` tells it (role, primary's port, link), `-` for one that does not answer: for a failure's message. */
  async replication(): Promise<string> {
    const states = await Promise.all(
      this.servers.map(async (server) => {
        const raw = rawClient(server);
        raw.on('error', () => {}); // a killed server: answered `-`
        try {
          const info = parseInfo(await raw.info('replication'));
          const field = (name: string): string => info.get(name) ?? '?';
          return `${server.port} ${field('role')} of ${field('master_port')} link ${field('master_link_status')} replicas ${field('connected_slaves')}`;
        } catch {
          return `${server.port} -`;
        } finally {
          raw.disconnect();
        }
      }),
    );
    return states.join('; ');
  }

  /** Resolves with the first line logged from `since` on that contains every one of `texts` (at once if it was logged already). */
  logged(since: number, ...texts: string[]): Promise<string> {
    const find = (): string | undefined => this.loggedSince(since).find((line) => texts.every((text) => line.includes(text)));
    return new Promise((resolve) => {
      const found = find();
      if (found !== undefined) return resolve(found);
      const listener = (): void => {
        const line = find();
        if (line === undefined) return;
        this.#listeners.delete(listener);
        resolve(line);
      };
      this.#listeners.add(listener);
    });
  }

  /** The port Sentinel names as the primary now. */
  async masterPort(): Promise<number> {
    return Number(((await this.#ask.call('SENTINEL', 'get-master-addr-by-name', GROUP)) as string[])[1]);
  }

  server(port: number): RedisServer {
    const server = this.servers.find((s) => s.port === port);
    if (!server) throw new Error(`no server on port ${port}`);
    return server;
  }

  /**
   * SENTINEL FAILOVER: promotes a replica while the primary is up. Sent again while Sentinel
   * answers NOGOODSLAVE (it has not yet heard from the replicas since they last changed) or INPROG.
   */
  async failover(): Promise<void> {
    await until(() => this.#ask.call('SENTINEL', 'failover', GROUP).then(() => true), 'Sentinel to accept SENTINEL FAILOVER');
  }

  async stop(): Promise<void> {
    this.#listeners.clear();
    this.#ask.disconnect();
    this.#sentinel.kill('SIGKILL');
    await Promise.all(this.servers.map((server) => server.stop()));
    rmSync(this.#dir, { recursive: true, force: true });
  }
}
