import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';

/** A worker process whose standard output is read line by line (see {@link lineWorker}). */
export interface LineWorker {
  /** Every line it printed so far. */
  readonly lines: string[];
  /** Resolves when it exits with 0; rejects on any other exit (a worker killed on purpose is never awaited). */
  readonly done: Promise<void>;
  readonly child: ChildProcess;
}

/** Runs `script` with node and `args`, collecting what it prints; its stderr goes to the test's. */
export function lineWorker(script: string, args: readonly string[]): LineWorker {
  const child = spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  const lines: string[] = [];
  createInterface({ input: child.stdout! }).on('line', (line) => lines.push(line));
  const done = once(child, 'exit').then(([code]) => {
    if (code !== 0) throw new Error(`worker exited with ${String(code)}`);
  });
  done.catch(() => {}); // a worker killed on purpose is never awaited; the others are
  return { lines, done, child };
}
