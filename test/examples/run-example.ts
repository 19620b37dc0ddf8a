/**
 * Runs an example from examples/ as a user would (`node examples/<file>`), against the built
 * package, and collects its output. Processes are stopped by their pid.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';

export const examplePath = (file: string): string => fileURLToPath(new URL(`../../examples/${file}`, import.meta.url));

export interface RunningExample {
  readonly child: ChildProcess;
  /** Everything written to stdout so far. */
  stdout(): string;
  stderr(): string;
  /** Resolves with the first stdout line matching `pattern`, or rejects if the process exits first. */
  line(pattern: RegExp): Promise<RegExpMatchArray>;
  /** Resolves with the exit code once the process has exited. */
  exited(): Promise<number | null>;
  stop(): Promise<void>;
}

export function startExample(file: string, args: readonly string[], env: Record<string, string>): RunningExample {
  return startScript(examplePath(file), args, env);
}

/** Runs any script with node, as {@link startExample} runs an example: `path` is absolute. */
export function startScript(path: string, args: readonly string[], env: Record<string, string>): RunningExample {
  const child = spawn(process.execPath, [path, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  const listeners = new Set<() => void>();
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    out += chunk;
    for (const listener of listeners) listener();
  });
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    err += chunk;
  });
  const exit = once(child, 'exit').then(([code]) => code as number | null);
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    line(pattern) {
      return new Promise((resolve, reject) => {
        const check = (): void => {
          const match = out.split('\n').map((l) => l.match(pattern)).find((m) => m !== null);
          if (match) {
            listeners.delete(check);
            resolve(match);
          }
        };
        listeners.add(check);
        check();
        void exit.then((code) => {
          listeners.delete(check);
          reject(new Error(`${path} exited (${code}) before printing ${pattern}:\n${out}\n${err}`));
        });
      });
    },
    exited: () => exit,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        await exit;
      }
    },
  };
}
