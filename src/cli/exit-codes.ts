/**
 * The `latchkey` command's exit codes. `exec` otherwise exits with its command's own code, or
 * 128 + N when the command was killed by signal N (as shells report it).
 */
export const EXIT = {
  /** Success (`status`: the lock is held). */
  OK: 0,
  /** An error not covered below (Redis refused a command, an unexpected failure). */
  ERROR: 1,
  /** `status`: the lock is free. `release --force`: the lock was not held. */
  FREE: 3,
  /** Bad usage: an unknown option, an invalid duration or URL (sysexits EX_USAGE). */
  USAGE: 64,
  /** Redis could not be reached (sysexits EX_UNAVAILABLE). */
  UNAVAILABLE: 69,
  /** `exec`: the lock is held by someone else and `--no-wait` or `--wait` ran out (EX_TEMPFAIL); `--conflict-exit-code` changes it. */
  CONFLICT: 75,
  /** `exec`: the lease was lost while the command ran (renewal failed, or it was released by force); the command was stopped. */
  LEASE_LOST: 76,
  /** Interrupted (SIGINT) while waiting for the lock. */
  INTERRUPTED: 130,
} as const;

/** An error that ends the command with a one-line message on stderr and an exit code. */
export class CliError extends Error {
  readonly exitCode: number;
  constructor(message: string, exitCode: number = EXIT.ERROR, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'CliError';
    this.exitCode = exitCode;
  }
}
