import { createRequire } from 'node:module';
import { Command, CommanderError, Option } from 'commander';
import { InvalidOptionError, LockError, MIN_TTL, UnreachableError } from '../index.js';
import { DEFAULT_URL, type ConnectionOptions } from './connect.js';
import { parseDuration } from './duration.js';
import { exec } from './exec.js';
import { CliError, EXIT } from './exit-codes.js';
import { forceRelease, list, status, watch } from './inspect-commands.js';

const { version } = createRequire(import.meta.url)('../package.json') as { version: string };

const EXIT_CODES_HELP = `
Connection: --redlock URL,URL,... (a quorum of independent masters), else --url, else $REDIS_URL,
else ${DEFAULT_URL}. TLS with rediss://, ACL users with redis://user:password@host:port.

Exit codes:
  0    success; exec: the command's own code (128+N if a signal N killed it)
  1    an error (Redis refused a command, an unexpected failure)
  3    status: the lock is free; release: it was not held
  64   bad usage (unknown option, invalid duration, URL or lock name)
  69   Redis could not be reached, or did not answer within 5s
  75   exec: the lock is busy (--no-wait, or --wait ran out); see --conflict-exit-code
  76   exec: the lease was lost while the command ran; the command was stopped
  126  exec: the command could not be run
  127  exec: the command was not found
  130  exec: interrupted while waiting for the lock`;

function withConnection(command: Command): Command {
  return command
    .option('--url <url>', 'Redis URL (default: $REDIS_URL, else redis://127.0.0.1:6379)')
    .option('--redlock <urls>', 'comma-separated URLs of independent masters: lock by majority (Redlock)')
    .option('--prefix <prefix>', 'key prefix (default "latchkey:")');
}

/** The shortest `watch --interval`, ms. */
const MIN_INTERVAL = 100;

const duration = (option: string) => (text: string) => parseDuration(text, option);

function exitCode(text: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 0 || n > 255) throw new CliError(`--conflict-exit-code: "${text}" is not an exit code (0 to 255)`, EXIT.USAGE);
  return n;
}

/** Builds the program; `done` receives each command's exit code. */
export function program(done: (code: number) => void): Command {
  const root = new Command('latchkey')
    .description('Distributed locks on Redis from the shell: flock(1) for a fleet.')
    .version(version)
    .enablePositionalOptions()
    .showHelpAfterError('(latchkey --help lists the commands and exit codes)')
    .addHelpText('after', EXIT_CODES_HELP)
    .exitOverride();

  // --wait and --no-wait set one value (the last one given wins): both at once is a contradiction, refused.
  const waitFlags = new Set<string>();
  withConnection(
    root
      .command('exec')
      .description('hold KEY while COMMAND runs (the lease is renewed), release it when COMMAND exits, and exit with its code')
      .argument('<key>', 'the lock name')
      .argument('<command...>', 'the command and its arguments, after --')
      .usage('[options] KEY -- COMMAND [ARGS...]')
      .passThroughOptions()
      .addOption(new Option('--ttl <duration>', 'lease time to live; renewed every third of it').default(30_000, '30s').argParser(duration('--ttl')))
      .option('--wait <duration>', 'longest wait for the lock (default: wait until it is free)', duration('--wait'))
      .option('--no-wait', 'fail at once if the lock is busy')
      .addOption(new Option('--conflict-exit-code <n>', 'exit code when the lock stays busy').default(EXIT.CONFLICT).argParser(exitCode))
      .addOption(new Option('--kill-after <duration>', 'when the lease is lost: SIGTERM, then SIGKILL after this').default(10_000, '10s').argParser(duration('--kill-after')))
      .addHelpText('after', '\nThe command gets LATCHKEY_FENCE (the lease\'s fencing token) and LATCHKEY_KEY in its environment.')
      .on('option:wait', () => waitFlags.add('--wait'))
      .on('option:no-wait', () => waitFlags.add('--no-wait')),
  ).action(async (key: string, command: string[], o: ConnectionOptions & { ttl: number; wait?: number | boolean; conflictExitCode: number; killAfter: number }) => {
    if (waitFlags.size > 1) throw new CliError('--wait and --no-wait contradict each other: give one (--no-wait is --wait 0)', EXIT.USAGE);
    // The library's own rule (MIN_TTL): one minimum for both.
    if (o.ttl < MIN_TTL) throw new CliError(`--ttl: at least ${MIN_TTL}ms, got ${o.ttl}ms`, EXIT.USAGE);
    const wait = o.wait === false ? 0 : typeof o.wait === 'number' ? o.wait : Infinity;
    // passThroughOptions keeps the `--` that ends latchkey's options.
    const argv = command[0] === '--' ? command.slice(1) : command;
    if (argv.length === 0) throw new CliError('exec: give the command to run after --, e.g. latchkey exec nightly-report -- ./report.sh', EXIT.USAGE);
    done(await exec(key, argv, { ...o, wait }));
  });

  withConnection(root.command('status').description('who holds KEY, for how long, its TTL, fence and waiters (exit 0 held, 3 free)').argument('<key>').option('--json', 'print JSON')).action(
    async (key: string, o: ConnectionOptions & { json?: boolean }) => done(await status(key, o)),
  );

  withConnection(
    root
      .command('list')
      .description('the locks held now: key, holder, held for, TTL left, fence, waiters')
      .argument('[pattern]', 'a Redis glob over lock names', '*')
      .option('--json', 'print JSON'),
  ).action(async (pattern: string, o: ConnectionOptions & { json?: boolean }) => done(await list(pattern, o)));

  withConnection(
    root
      .command('watch')
      .description('a live view of the locks held, refreshed in place')
      .argument('[pattern]', 'a Redis glob over lock names', '*')
      .addOption(new Option('--interval <duration>', 'refresh period, at least 100ms').default(1000, '1s').argParser(duration('--interval'))),
  ).action(async (pattern: string, o: ConnectionOptions & { interval: number }) => {
    // Each refresh scans the whole keyspace: a tight loop would load the server for nothing.
    if (o.interval < MIN_INTERVAL) throw new CliError(`--interval: at least ${MIN_INTERVAL}ms, got ${o.interval}ms`, EXIT.USAGE);
    done(await watch(pattern, o));
  });

  withConnection(
    root
      .command('release')
      .description("end whoever's lease holds KEY, and say whose it was (an operator's escape hatch)")
      .argument('<key>')
      .option('--force', 'required: you are breaking another process\'s lock'),
  ).action(async (key: string, o: ConnectionOptions & { force?: boolean }) => done(await forceRelease(key, o)));

  return root;
}

/** Runs the command line; resolves to the exit code. */
export async function main(argv: readonly string[]): Promise<number> {
  let code: number = EXIT.OK;
  try {
    await program((c) => (code = c)).parseAsync([...argv], { from: 'user' });
    return code;
  } catch (error) {
    if (error instanceof CommanderError) {
      // Help and --version exit 0; commander already printed its usage error.
      return error.exitCode === 0 ? EXIT.OK : EXIT.USAGE;
    }
    if (error instanceof CliError) {
      process.stderr.write(`latchkey: ${error.message}\n`);
      return error.exitCode;
    }
    const message = error instanceof LockError ? `${error.message} [${error.code}]` : error instanceof Error ? error.message : String(error);
    process.stderr.write(`latchkey: ${message}\n`);
    // A lock name or pattern the library refuses (empty, an unbalanced hash tag) is bad usage; a
    // Redis that stopped answering (status, list, watch, release: 5s) is one that cannot be reached.
    if (error instanceof InvalidOptionError) return EXIT.USAGE;
    return error instanceof UnreachableError ? EXIT.UNAVAILABLE : EXIT.ERROR;
  }
}

// `latchkey list | head`: a reader that went away is not an error.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  throw error;
});
const code = await main(process.argv.slice(2));
process.exitCode = code;
// Everything is closed by now; should a handle linger (a reconnecting client), do not hang on it.
setTimeout(() => process.exit(code), 2000).unref();
