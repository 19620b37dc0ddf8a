// Which latchkey build a bench loads: this repository's dist, or the one LATCHKEY_DIST names (a
// copy of another build's dist inside the repository, so that it finds ioredis), to compare builds.
import path from 'node:path';
import { pathToFileURL } from 'node:url';

/** The URL of the latchkey build to import. */
export function latchkeyModule() {
  const dist = process.env.LATCHKEY_DIST;
  return dist ? pathToFileURL(path.resolve(dist)).href : new URL('../../dist/index.js', import.meta.url).href;
}
