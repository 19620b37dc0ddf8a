import { execFileSync } from 'node:child_process';

/** Fails fast, with what to do, when redis-server is missing. */
export function setup(): void {
  try {
    execFileSync('redis-server', ['--version'], { stdio: 'pipe' });
  } catch {
    throw new Error('redis-server is not on PATH: the tests start their own servers. Install it (apt-get install redis-server).');
  }
}
