/**
 * The README's first example, run as printed: the first ```js/```ts block after the
 * `<!-- first-example -->` marker, on the README's first screen, with `from 'latchkey'` pointed
 * at the built package (dist/index.js), against a private redis-server (REDIS_URL).
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocks } from '../../src/index.js';
import { rawClient } from '../helpers/harness.js';
import { RedisServer } from '../helpers/redis-server.js';
import { startScript, type RunningExample } from './run-example.js';

const MARKER = '<!-- first-example -->';
const INSTALL = 'npm install latchkey ioredis';
/** The example and what comes before it must fit on the first screen. */
const FIRST_SCREEN_LINES = 45;

const repoFile = (path: string): string => fileURLToPath(new URL(`../../${path}`, import.meta.url));

interface FirstExample {
  readonly code: string;
  /** 1-based line of the block's closing fence. */
  readonly endLine: number;
}

/** The first ```js or ```ts block after the marker, which must come after the install line. */
function firstExample(readme: string): FirstExample {
  const install = readme.indexOf(INSTALL);
  const marker = readme.indexOf(MARKER);
  if (install < 0) throw new Error(`README.md: no \`${INSTALL}\``);
  if (marker < install) throw new Error(`README.md: no ${MARKER} after the install line`);
  const block = /```(?:js|ts|javascript|typescript)\n([\s\S]*?)\n```/.exec(readme.slice(marker));
  if (!block) throw new Error(`README.md: no \`\`\`js or \`\`\`ts block after ${MARKER}`);
  const end = marker + block.index + block[0].length;
  return { code: block[1]!, endLine: readme.slice(0, end).split('\n').length };
}

let server: RedisServer;
let raw: Redis;
let run: RunningExample | undefined;
const script = repoFile(`scratch/readme-first-example-${process.pid}.mjs`);

beforeAll(async () => {
  server = await RedisServer.start();
  raw = rawClient(server);
});

afterAll(async () => {
  await run?.stop();
  rmSync(script, { force: true });
  raw?.disconnect();
  await server?.stop();
});

describe("README.md's first example", () => {
  it('is on the first screen, after the install line', () => {
    const { endLine } = firstExample(readFileSync(repoFile('README.md'), 'utf8'));
    expect(endLine).toBeLessThanOrEqual(FIRST_SCREEN_LINES);
  });

  it('runs as printed against Redis: takes the lock, prints its fence, releases it, and exits', async () => {
    const { code } = firstExample(readFileSync(repoFile('README.md'), 'utf8'));
    expect(code).toContain("from 'latchkey'");
    const runnable = code.replaceAll("from 'latchkey'", `from '${pathToFileURL(repoFile('dist/index.js')).href}'`);
    mkdirSync(repoFile('scratch'), { recursive: true });
    writeFileSync(script, runnable);

    run = startScript(script, [], { REDIS_URL: server.url });
    const [, fence] = await run.line(/^invoice 42 is ours, fence (\d+)$/);
    // It exits by itself: nothing left connected or scheduled.
    expect(await run.exited()).toBe(0);
    expect(run.stderr()).toBe('');

    // The fence is microseconds since the epoch (as the README's fencing section says), exact in a number.
    const issued = Number(fence);
    expect(Number.isSafeInteger(issued)).toBe(true);
    expect(issued).toBeGreaterThan(Date.now() * 1000 - 3_600_000_000);
    // The lock was released, and the lease was the server's.
    const locks = createLocks({ redis: raw });
    try {
      expect(await locks.inspect('invoice:42')).toMatchObject({ held: false, fence: issued });
    } finally {
      await locks.close();
    }
  });
});
