import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';

/** Fails fast, with what to do, when redis-server or the build is missing. */
export function setup(): void {
  try {
    execFileSync('redis-server', ['--version'], { stdio: 'pipe' });
  } catch {
    throw new Error('redis-server is not on PATH: the tests start their own servers. Install it (apt-get install redis-server).');
  }
  if (!existsSync(new URL('../../dist/index.js', import.meta.url)) || !existsSync(new URL('../../dist/cli.js', import.meta.url))) {
    throw new Error('dist/ is missing: worker processes and the CLI tests use the built package. Run `npm run build` (npm test does).');
  }
  try {
    execFileSync('tmux', ['-V'], { stdio: 'pipe' });
  } catch {
    throw new Error('tmux is not on PATH: a CLI test drives `latchkey exec` in a real terminal. Install it (apt-get install tmux).');
  }
}
