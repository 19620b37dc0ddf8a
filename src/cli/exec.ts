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

/** The signals latchkey handles from start to end: none of them may kill it with the lock held. */
const HANDLED: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT'];

/**
 * Where a signal goes, phase by phase: while connecting and waiting it stops the wait; while the
 * command runs it is passed on (one that comes between the acquire and the spawn is passed on
 * once the command exists); while releasing it is ignored (the release finishes, then latchkey exits).
 */
interface SignalRoute {
  target: (signal: NodeJS.Signals) => void;
}

/** Runs `command` while holding `key`; resolves to the exit code latchkey should exit with. */
export async function exec(key: string, command: readonly string[], options: ExecOptions): Promise<number> {
  const stop = new AbortController();
  const route: SignalRoute = { target: (signal) => stop.abort(signal) };
  const handler = (signal: NodeJS.Signals): void => route.target(signal);
  for (const s of HANDLED) process.on(s, handler);
  try {
    const connection = await connect(options, { ttl: options.ttl });
    try {
      const lease = await acquire(connection.locks, key, options, stop.signal);
      if (typeof lease === 'number') return lease;
      return await run(lease, key, command, options, route);
    } finally {
      await connection.close();
    }
  } finally {
    for (const s of HANDLED) process.off(s, handler);
  }
}

/** Waits for the lock (a signal stops the wait); a number is an exit code. */
async function acquire(locks: Awaited<ReturnType<typeof connect>>['locks'], key: string, options: ExecOptions, signal: AbortSignal): Promise<Lease | number> {
  const started = Date.now();
  // No line for a lock that is free or comes within a moment: it would only flicker.
  let status: { stop(): void } | undefined;
  const later = options.wait > 0 ? setTimeout(() => (status = showWaiting(locks, key, started)), 200) : undefined;
  // Erases the status line before anything else is printed (Ctrl-C, a timeout): it must not stay on screen.
  const endStatus = (): void => {
    clearTimeout(later);
    status?.stop();
    status = undefined;
  };
  try {
    return await locks.acquire(key, { wait: options.wait, signal, renew: true, ttl: options.ttl });
  } catch (error) {
    endStatus();
    if (signal.aborted) {
      say(`interrupted (${String(signal.reason)}) while waiting for "${key}"`);
      const number = constants.signals[signal.reason as NodeJS.Signals];
      return signal.reason === 'SIGINT' || number === undefined ? EXIT.INTERRUPTED : 128 + number;
    }
    if (error instanceof LockTimeoutError) {
      const info = await locks.inspect(key).catch(() => undefined);
      const holder = info ? describeHolder(info) : 'held';
      say(`"${key}" is ${holder}; ${options.wait === 0 ? 'not waiting (--no-wait)' : `gave up after ${formatDuration(Date.now() - started)}`}`);
      return options.conflictExitCode;
    }
    throw error;
  } finally {
    endStatus();
  }
}

/** Runs the command under the lease; stops it when the lease is lost; releases at the end. */
async function run(lease: Lease, key: string, command: readonly string[], options: ExecOptions, route: SignalRoute): Promise<number> {
  // Signals sent to latchkey go to the command. Ctrl-C on a terminal already reaches the whole
  // foreground process group, the command included: it is not sent twice.
  // (One that comes before the command exists is passed on once it does, even a Ctrl-C.)
  const early: NodeJS.Signals[] = [];
  route.target = (signal) => early.push(signal);
  const child = spawn(command[0]!, command.slice(1), {
    stdio: 'inherit',
    env: { ...process.env, LATCHKEY_KEY: key, LATCHKEY_FENCE: String(lease.fence) },
  });
  // Listened to before any signal is sent: a kill that fails emits 'error' at once.
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; error?: Error }>((resolve) => {
    child.on('error', (error: NodeJS.ErrnoException) => {
      // A signal that could not be sent (EPERM: a setuid command, say) is no end: the command
      // still runs, and the lock stays held until it exits. Any other error: it could not start.
      if (error.syscall === 'kill') say(`could not signal ${command[0]} (${error.message}); waiting for it to exit`);
      else resolve({ code: null, signal: null, error });
    });
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
  route.target = (signal) => {
    if (signal === 'SIGINT' && process.stdin.isTTY) return;
    child.kill(signal);
  };
  for (const signal of early) child.kill(signal);

  let lost: unknown;
  let killTimer: NodeJS.Timeout | undefined;
  const onLost = (): void => {
    lost = lease.signal.reason;
    const reason = lost instanceof Error ? lost.message : String(lost);
    say(`lost the lock "${key}" while the command ran (${reason}); stopping it: SIGTERM, then SIGKILL after ${formatDuration(options.killAfter)}`);
    child.kill('SIGTERM');
    killTimer = setTimeout(() => child.kill('SIGKILL'), options.killAfter);
  };
  // A lease that ended before this line (its validity ran out during the spawn) aborted its
  // signal already, and a listener added now would never hear of it.
  if (lease.signal.aborted) onLost();
  else lease.signal.addEventListener('abort', onLost, { once: true });

  const outcome = await exited;
  // Held to the command's end (as far as this process can tell): a release that then gets no
  // answer does not undo that the command ran under the lock.
  const heldToEnd = lost === undefined && !lease.signal.aborted && lease.timeLeft() > 0;
  clearTimeout(killTimer);
  lease.signal.removeEventListener('abort', onLost);
  route.target = () => {}; // releasing: finish that, then exit

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
    if (error instanceof LeaseLostError && heldToEnd && error.reason === 'unreachable') {
      say(`could not release "${key}": Redis did not answer before the lease's validity ran out (the command ran under the lock to its end); it expires by its TTL`);
      return exitCode;
    }
    if (error instanceof LeaseLostError) {
      say(`the lease on "${key}" was lost before the command ended (${error.message}): its work was not fully protected`);
      return EXIT.LEASE_LOST;
    }
    // The command ran under the lock to its end; the lock now expires by its TTL.
    say(`could not release "${key}" (${error instanceof Error ? error.message : String(error)}); it expires by its TTL`);
  }
  return exitCode;
}

