// The worker processes of bench/run.mjs: each runs bench/worker.mjs, is set up over IPC and
// reports back; `withWorkers` makes sure every worker a pass spawned is gone when it ends, and
// `liveChildren` lets run.mjs kill what is left if it exits early.
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { baseString, sleep } from './clock.mjs';

const WORKER = fileURLToPath(new URL('../worker.mjs', import.meta.url));
const log = (...args) => process.stderr.write(`${args.join(' ')}\n`);

/** Every worker process still running. */
export const liveChildren = new Set();

function spawnWorker(setup) {
  const child = fork(WORKER, [], {
    stdio: ['ignore', 2, 2, 'ipc'], // a worker's console output goes to our stderr
    env: { ...process.env, BENCH_BASE: baseString },
  });
  liveChildren.add(child);
  child.on('error', () => {}); // e.g. EPIPE on a message to a worker that is exiting
  const inbox = [];
  const waiting = [];
  let failure = null;
  const fail = (error) => {
    failure ??= error;
    for (const w of waiting.splice(0)) w.reject(failure);
  };
  child.on('message', (msg) => {
    if (msg.type === 'fatal') return fail(new Error(`worker ${setup.role} failed: ${msg.message}`));
    const i = waiting.findIndex((w) => w.type === msg.type);
    if (i >= 0) waiting.splice(i, 1)[0].resolve(msg);
    else inbox.push(msg);
  });
  const exited = new Promise((resolve) =>
    child.once('exit', (code, signal) => {
      liveChildren.delete(child);
      fail(new Error(`worker ${setup.role} exited (${signal ?? code}) before reporting`));
      resolve();
    }),
  );
  child.send({ cmd: 'setup', ...setup });
  return {
    send(msg) {
      if (child.connected) child.send(msg, () => {});
    },
    /** The next message of `type`, or a rejection after `timeoutMs` or when the worker dies. */
    next(type, timeoutMs) {
      const i = inbox.findIndex((m) => m.type === type);
      if (i >= 0) return Promise.resolve(inbox.splice(i, 1)[0]);
      if (failure) return Promise.reject(failure);
      return new Promise((resolve, reject) => {
        const entry = { type, resolve, reject };
        const timer = setTimeout(() => {
          waiting.splice(waiting.indexOf(entry), 1);
          reject(new Error(`worker ${setup.role}: no "${type}" within ${Math.round(timeoutMs / 1000)} s`));
        }, timeoutMs);
        entry.resolve = (m) => (clearTimeout(timer), resolve(m));
        entry.reject = (e) => (clearTimeout(timer), reject(e));
        waiting.push(entry);
      });
    },
    /** Waits up to `capMs` for the worker to exit by itself, then kills it. */
    async end(capMs = 15_000) {
      if (child.exitCode === null && child.signalCode === null) {
        const timer = sleep(capMs).then(() => 'late');
        if ((await Promise.race([exited, timer])) === 'late') {
          log(`    (worker ${child.pid} still busy ${capMs / 1000} s after the end: killed)`);
          child.kill('SIGKILL');
        }
      }
      await exited;
    },
    kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
  };
}

/** Runs `body(spawn)`, then makes sure every worker it spawned is gone. */
export async function withWorkers(body) {
  const workers = [];
  const spawn = (setup) => {
    const w = spawnWorker(setup);
    workers.push(w);
    return w;
  };
  try {
    return await body(spawn);
  } finally {
    for (const w of workers) w.send({ cmd: 'stop' });
    await Promise.all(workers.map((w) => w.end()));
  }
}
