/** The `latchkey` command, built (dist/cli.js), spawned by the CLI tests. */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';

/** The built command. */
export const CLI = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));

/** A spawned command. */
export interface CliRun {
  readonly child: ChildProcess;
  /** Resolves when the process exits. */
  readonly done: Promise<{ code: number | null; stdout: string; stderr: string }>;
  /** Resolves once stdout contains `text`. */
  printed(text: string): Promise<void>;
}

/** Spawns the command with `args`, the environment `env` added to this process's. */
export function spawnCli(args: readonly string[], env: Record<string, string> = {}): CliRun {
  const child = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const done = once(child, 'exit').then(([code]) => ({ code: code as number | null, stdout, stderr }));
  const printed = async (text: string): Promise<void> => {
    while (!stdout.includes(text)) {
      const [exited] = await Promise.race([once(child.stdout!, 'data'), done.then(() => ['exit'])]);
      if (exited === 'exit' && !stdout.includes(text)) throw new Error(`exited before printing "${text}": ${stderr}`);
    }
  };
  return { child, done, printed };
}
