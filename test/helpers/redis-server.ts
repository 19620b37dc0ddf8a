/**
 * Starts real redis-server processes on free loopback ports for tests, and stops only the
 * processes it started, by pid. Servers can be killed, paused, resumed and restarted on the
 * same port, with or without persistence.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface RedisServerOptions {
  /** Keep data on disk across restarts (appendonly with fsync always). Default false. */
  readonly persistence?: boolean;
  /** Extra command-line arguments, e.g. ['--maxmemory', '10mb']. */
  readonly args?: readonly string[];
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/**
 * Resolves once the spawned redis-server `child` says it accepts connections (on stdout or stderr,
 * with `--logfile ''`); rejects if it exits first (`onExit` runs then) or cannot be spawned. Its
 * output is drained from then on. `what` names it in the error, with the end of its output.
 */
export function untilReady(child: ChildProcess, what: string, onExit?: () => void): Promise<void> {
  return new Promise((resolve, reject) => {
    let output = '';
    const onData = (chunk: Buffer): void => {
      output += chunk.toString();
      if (output.includes('Ready to accept connections')) {
        child.stdout?.off('data', onData);
        child.stderr?.off('data', onData);
        child.stdout?.resume();
        child.stderr?.resume();
        child.off('exit', exited);
        resolve();
      }
    };
    const exited = (code: number | null): void => {
      onExit?.();
      reject(new Error(`${what} exited with ${code}: ${output.slice(-500)}`));
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('exit', exited);
    child.once('error', reject);
  });
}

/** The fields of an `INFO` (or `CLUSTER INFO`) reply, by name. */
export function parseInfo(text: string): Map<string, string> {
  const fields = new Map<string, string>();
  for (const line of text.split(/\r?\n/)) {
    const colon = line.indexOf(':');
    if (colon > 0) fields.set(line.slice(0, colon), line.slice(colon + 1).trim());
  }
  return fields;
}

export class RedisServer {
  readonly port: number;
  readonly dir: string;
  readonly #options: RedisServerOptions;
  #child: ChildProcess | undefined;

  private constructor(port: number, options: RedisServerOptions) {
    this.port = port;
    this.#options = options;
    this.dir = mkdtempSync(join(tmpdir(), 'latchkey-redis-'));
  }

  static async start(options: RedisServerOptions = {}): Promise<RedisServer> {
    for (let attempt = 0; ; attempt++) {
      const server = new RedisServer(await freePort(), options);
      try {
        await server.#spawn();
        return server;
      } catch (error) {
        server.#cleanup();
        if (attempt >= 4) throw error;
      }
    }
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get pid(): number | undefined {
    return this.#child?.pid;
  }

  /** SIGKILL: the server dies at once, losing what it did not persist. */
  async kill(): Promise<void> {
    await this.#signalAndWait('SIGKILL');
  }

  /** SIGSTOP: the server freezes; connections stay open but nothing is answered. */
  pause(): void {
    this.#child?.kill('SIGSTOP');
  }

  resume(): void {
    this.#child?.kill('SIGCONT');
  }

  /** Kills the server and starts it again on the same port (and directory, so persisted data returns). */
  async restart(): Promise<void> {
    await this.kill();
    await this.#spawn();
  }

  async stop(): Promise<void> {
    this.resume();
    await this.#signalAndWait('SIGKILL');
    this.#cleanup();
  }

  #spawn(): Promise<void> {
    const persistence = this.#options.persistence
      ? ['--appendonly', 'yes', '--appendfsync', 'always']
      : ['--appendonly', 'no'];
    const args = [
      '--port', String(this.port),
      '--bind', '127.0.0.1',
      '--save', '',
      '--dir', this.dir,
      '--logfile', '',
      '--enable-debug-command', 'local',
      ...persistence,
      ...(this.#options.args ?? []),
    ];
    const child = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    this.#child = child;
    return untilReady(child, `redis-server on port ${this.port}`);
  }

  async #signalAndWait(signal: NodeJS.Signals): Promise<void> {
    const child = this.#child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill(signal);
    await exited;
    this.#child = undefined;
  }

  #cleanup(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}
