// CPU time of another process (a redis-server), and of a process's threads other than its main
// one, from /proc (Linux only).
import { readdirSync, readFileSync } from 'node:fs';

/** A process's user and system CPU time so far, µs, from /proc/<pid>/stat (10 ms ticks). */
export function processCpu(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return { user: Number(fields[11]) * 10_000, system: Number(fields[12]) * 10_000 };
}

/**
 * The user and system CPU time so far (µs, 10 ms ticks) of a process's threads other than its main
 * one: in a node process, V8's optimizing compiler and its garbage collector's helpers, and libuv's
 * thread pool. NaN where /proc cannot be read.
 */
export function otherThreadsCpu(pid = process.pid) {
  try {
    let ticks = 0;
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      if (tid === String(pid)) continue;
      try {
        const fields = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8').split(') ')[1].split(' ');
        ticks += Number(fields[11]) + Number(fields[12]);
      } catch {
        // the thread ended meanwhile: its time is lost (a few ticks at most)
      }
    }
    return ticks * 10_000;
  } catch {
    return NaN;
  }
}
