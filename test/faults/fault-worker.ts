/**
 * A fault-suite worker process (test/faults/worker.mjs) as the harness sees it: its options, its
 * events fed into the history, and the faults done to the process itself (pause, clock jump, kill).
 */
import type { ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { History } from './history.js';
import type { FaultProxy } from './proxy.js';

export interface WorkerOptions {
  readonly ttl: number;
  readonly wait: number;
  readonly hold: number;
  readonly rounds?: number;
  readonly renew?: boolean;
  readonly idle?: number;
  readonly failIdle?: number;
  readonly commandTimeout?: number;
  /** createLocks's replica acknowledgement option. */
  readonly replication?: { readonly replicas: number; readonly timeout?: number; readonly shortfall?: 'fail' | 'accept' };
  /** createLocks's recheck (ms). */
  readonly recheck?: number;
  /** The rate of the worker's monotonic clock as latchkey sees it (0.9: 10% slow). Default 1. */
  readonly clockRate?: number;
  /**
   * True: each hold ends when the test says so (the harness's `endHold`), or after `hold` ms if
   * it never does: a test whose faults must all land inside one holder's window does not depend
   * on how fast the machine restarts a server or starts the next worker.
   */
  readonly holdUntilTold?: boolean;
}

export class Worker {
  readonly id: string;
  /** One proxy per Redis node, in node order: this worker's own links to Redis. */
  readonly proxies: readonly FaultProxy[];
  readonly #child: ChildProcess;
  readonly #history: History;
  readonly exited: Promise<void>;
  #stopped = false;

  constructor(id: string, child: ChildProcess, proxies: readonly FaultProxy[], history: History) {
    this.id = id;
    this.#child = child;
    this.proxies = proxies;
    this.#history = history;
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-2000);
    });
    child.once('exit', (code, signal) => {
      history.note('exit', { of: id, code, signal, stderr: code ? stderr : '' });
    });
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const raw = JSON.parse(line) as Record<string, unknown>;
      history.add({
        ...raw,
        t: BigInt(raw.t as string),
        p: raw.p as string,
        ev: raw.ev as string,
        ...(raw.validUntil === undefined ? {} : { validUntil: BigInt(raw.validUntil as string) }),
      });
    });
  }

  get pid(): number | undefined {
    return this.#child.pid;
  }

  get alive(): boolean {
    return this.#child.exitCode === null && this.#child.signalCode === null;
  }

  /** SIGSTOP: the worker freezes (a long GC, a suspended VM). */
  pause(): void {
    this.#history.note('fault', { kind: 'pause-worker', of: this.id });
    this.#stopped = true;
    this.#child.kill('SIGSTOP');
  }

  resume(): void {
    this.#stopped = false;
    this.#child.kill('SIGCONT');
    this.#history.note('heal', { kind: 'pause-worker', of: this.id });
  }

  /** Steps the worker's wall clock (Date.now) by an hour, forward then back alternately (SIGUSR2; see worker.mjs). */
  jumpClock(): void {
    this.#history.note('fault', { kind: 'clock-jump', of: this.id });
    this.#child.kill('SIGUSR2');
  }

  /** SIGKILL, and wait for the exit; recorded as a fault unless `fault: false` (the end of a run). */
  async kill(options: { fault?: boolean } = {}): Promise<void> {
    if (!this.alive) return;
    if (options.fault ?? true) this.#history.note('fault', { kind: 'kill-worker', of: this.id });
    this.#child.kill('SIGKILL');
    await this.exited;
  }

  async stop(): Promise<void> {
    if (this.#stopped) this.#child.kill('SIGCONT');
    if (this.alive) this.#child.kill('SIGKILL');
    await this.exited;
  }
}
