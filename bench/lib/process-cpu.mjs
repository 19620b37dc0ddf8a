// CPU time of another process (a redis-server), from /proc (Linux only).
import { readFileSync } from 'node:fs';

/** A process's user and system CPU time so far, µs, from /proc/<pid>/stat (10 ms ticks). */
export function processCpu(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return { user: Number(fields[11]) * 10_000, system: Number(fields[12]) * 10_000 };
}
