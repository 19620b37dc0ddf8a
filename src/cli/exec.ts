import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import { LeaseLostError, LockTimeoutError, type Lease } from '../index.js';
import { connect, type ConnectionOptions } from './connect.js';
import { formatDuration } from './duration.js';
import { EXIT } from './exit-codes.js';
import { describeHolder, showWaiting } from './waiting-status.js';

export interface ExecOptions extends ConnectionOptions {
  /** Lease TTL, ms; the watchdog renews it every third. */
  readonly ttl: number;
  /** Longest wait, ms (Infinity: until acquired; 0: try once). */
  readonly wait: number;
  /** Exit code when the lock stays busy. */
  readonly conflictExitCode: number;
  /** Grace between SIGTERM and SIGKILL when the lease is lost, ms. */
  readonly killAfter: number;
}

const say = (message: string): void => {
  process.stderr.write(`latchkey: ${message}\n`);
};

/** Runs `command` while holding `key`; resolves to the exit code latchkey should exit with. */
export async function exec(key: string, command: readonly string[], options: ExecOptions): Promise<number> {
  const connection = await connect(options, { ttl: options.ttl });
  try {
    const lease = await acquire(connection.locks, key, options);
    if (typeof lease === 'number') return lease;
    return await run(lease, key, command, options);
  } finally {
    await connection.close();
  }
}

/** Waits for the lock (Ctrl-C or SIGTERM stops the wait); a number is an exit code. */
async function acquire(locks: Awaited<ReturnType<typeof connect>>['locks'], key: string, options: ExecOptions): Promise<Lease | number> {
  const stop = new AbortController();
  const onSignal = (signal: NodeJS.Signals): void => stop.abort(signal);
  process.on('SIGINT', onSignal).on('SIGTERM', onSignal);
  const started = Date.now();
  // No line for a lock that is free or comes within a moment: it would only flicker.
  let status: { stop(): void } | undefined;
  const later = options.wait > 0 ? setTimeout(() => (status = showWaiting(locks, key, started)), 200) : undefined;
  try {
    return await locks.acquire(key, { wait: options.wait, signal: stop.signal, renew: true, ttl: options.ttl });
  } catch (error) {
    if (stop.signal.aborted) {
      say(`interrupted (${String(stop.signal.reason)}) while waiting for "${key}"`);
      return stop.signal.reason === 'SIGTERM' ? 128 + constants.signals.SIGTERM : EXIT.INTERRUPTED;
    }
    if (error instanceof LockTimeoutError) {
      const info = await locks.inspect(key).catch(() => undefined);
      const holder = info ? describeHolder(info) : 'held';
      say(`"${key}" is ${holder}; ${options.wait === 0 ? 'not waiting (--no-wait)' : `gave up after ${formatDuration(Date.now() - started)}`}`);
      return options.conflictExitCode;
    }
    throw error;
  } finally {
    clearTimeout(later);
    status?.stop();
    process.off('SIGINT', onSignal).off('SIGTERM', onSignal);
  }
}

/** Runs the command under the lease; stops it when the lease is lost; releases at the end. */
async function run(lease: Lease, key: string, command: readonly string[], options: ExecOptions): Promise<number> {
  const child = spawn(command[0]!, command.slice(1), {
    stdio: 'inherit',
    env: { ...process.env, LATCHKEY_KEY: key, LATCHKEY_FENCE: String(lease.fence) },
  });
  // Signals sent to latchkey go to the command. Ctrl-C on a terminal already reaches the whole
  // foreground process group, the command included: it is not sent twice.
  const forward = (signal: NodeJS.Signals): void => {
    if (signal === 'SIGINT' && process.stdin.isTTY) return;
    child.kill(signal);
  };
  const forwarded: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT'];
  for (const s of forwarded) process.on(s, forward);

  let lost: unknown;
  let killTimer: NodeJS.Timeout | undefined;
  const onLost = (): void => {
    lost = lease.signal.reason;
    const reason = lost instanceof Error ? lost.message : String(lost);
    say(`lost the lock "${key}" while the command ran (${reason}); stopping it: SIGTERM, then SIGKILL after ${formatDuration(options.killAfter)}`);
    child.kill('SIGTERM');
    killTimer = setTimeout(() => child.kill('SIGKILL'), options.killAfter);
  };
  lease.signal.addEventListener('abort', onLost, { once: true });

  const outcome = await new Promise<{ code: number | null; signal: NodeJS.Signals | null; error?: Error }>((resolve) => {
    child.once('error', (error) => resolve({ code: null, signal: null, error }));
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
  clearTimeout(killTimer);
  lease.signal.removeEventListener('abort', onLost);
  for (const s of forwarded) process.off(s, forward);

  let exitCode: number;
  if (outcome.error) {
    const notFound = (outcome.error as NodeJS.ErrnoException).code === 'ENOENT';
    say(`cannot run ${command[0]}: ${notFound ? 'command not found' : outcome.error.message}`);
    exitCode = notFound ? 127 : 126;
  } else {
    exitCode = outcome.code ?? 128 + (constants.signals[outcome.signal!] ?? 0);
  }
  if (lost !== undefined) return EXIT.LEASE_LOST;
  try {
    await lease.release();
  } catch (error) {
    if (error instanceof LeaseLostError) {
      say(`the lease on "${key}" was lost before the command ended (${error.message}): its work was not fully protected`);
      return EXIT.LEASE_LOST;
    }
    // The command ran under the lock to its end; the lock now expires by its TTL.
    say(`could not release "${key}" (${error instanceof Error ? error.message : String(error)}); it expires by its TTL`);
  }
  return exitCode;
}

