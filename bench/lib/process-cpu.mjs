// CPU time of another process (a redis-server), and of a process's threads other than its main
// one, from /proc (Linux only).
import { readdirSync, readFileSync } from 'node:fs';

/** User and system CPU time so far, µs, from a /proc `stat` file (10 ms ticks). */
function statCpu(path) {
  const fields = readFileSync(path, 'utf8').split(') ')[1].split(' ');
  return { user: Number(fields[11]) * 10_000, system: Number(fields[12]) * 10_000 };
}

/** A process's user and system CPU time so far, µs, from /proc/<pid>/stat (10 ms ticks). */
export function processCpu(pid) {
  return statCpu(`/proc/${pid}/stat`);
}

/**
 * The user and system CPU time so far (µs, 10 ms ticks) of a process's threads other than its main
 * one: in a node process, V8's optimizing compiler and its garbage collector's helpers, and libuv's
 * thread pool. NaN where /proc cannot be read.
 */
export function otherThreadsCpu(pid = process.pid) {
  try {
    let used = 0;
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      if (tid === String(pid)) continue;
      try {
        const { user, system } = statCpu(`/proc/${pid}/task/${tid}/stat`);
        used += user + system;
      } catch {
        // the thread ended meanwhile: its time is lost (a few ticks at most)
      }
    }
    return used;
  } catch {
    return NaN;
  }
}
