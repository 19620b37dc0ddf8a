// Pack smoke test: installs the package the way a user gets it (the `npm pack` tarball, in a fresh
// project outside the repo) and checks that it loads and type-checks there:
//   1. ESM:  import { createLocks, LockError } from 'latchkey'   -> dist/index.js
//   2. CJS:  const { createLocks } = require('latchkey')          -> dist/index.cjs
//      Both acquire and release a lock on the in-memory backend (fence is a number), check that a
//      validation error is a LockError, and that a borrowed ioredis client is recognised (no
//      connection is made).
//   3. TypeScript: `await using` on a lease and `import type { Lease, AcquireOptions }`, compiled
//      with the repo's own typescript (tsc --noEmit, module NodeNext, target ES2022, lib ES2022 +
//      esnext.disposable, strict, declarations checked too): once as ESM (.ts in a "type": "module"
//      package, types from index.d.ts) and once as CJS (.cts in a CommonJS package, index.d.cts).
// The project also gets ioredis and @types/node, at the versions in the repo's node_modules
// (npm --prefer-offline: from the npm cache when there, else the registry).
//
// Run: node scripts/pack-smoke.mjs   (part of `npm run test:pack`; builds dist/ first if missing)
// Prints one line per check; exit code 1 if any failed. The temporary directory is always removed.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..');
const tsc = join(repo, 'node_modules', 'typescript', 'bin', 'tsc');

const ESM_CHECK = `import assert from 'node:assert/strict';
import { createLocks, LockError } from 'latchkey';
import { Redis } from 'ioredis';

const file = import.meta.resolve('latchkey');
assert.match(file, /\\/dist\\/index\\.js$/, 'the "import" condition should load dist/index.js');
const locks = createLocks();
const lease = await locks.acquire('smoke');
assert.equal(typeof lease.fence, 'number');
await lease.release();
assert.equal(lease.state, 'released');
await assert.rejects(locks.acquire(''), (error) => error instanceof LockError && error.code === 'INVALID_OPTION');
await locks.close();

const client = new Redis({ lazyConnect: true });
const borrowing = createLocks({ redis: client });
assert.equal(borrowing.backend, 'redis (ioredis)');
await borrowing.close();
client.disconnect();
console.log(\`\${file.slice(file.lastIndexOf('/dist/') + 1)}, fence \${lease.fence}\`);
`;

const CJS_CHECK = `const assert = require('node:assert/strict');
const { createLocks, LockError } = require('latchkey');
const { Redis } = require('ioredis');

async function main() {
  const file = require.resolve('latchkey');
  assert.match(file, /[\\\\/]dist[\\\\/]index\\.cjs$/, 'the "require" condition should load dist/index.cjs');
  const locks = createLocks();
  const lease = await locks.acquire('smoke');
  assert.equal(typeof lease.fence, 'number');
  await lease.release();
  assert.equal(lease.state, 'released');
  await assert.rejects(locks.acquire(''), (error) => error instanceof LockError && error.code === 'INVALID_OPTION');
  await locks.close();

  const client = new Redis({ lazyConnect: true });
  const borrowing = createLocks({ redis: client });
  assert.equal(borrowing.backend, 'redis (ioredis)');
  await borrowing.close();
  client.disconnect();
  console.log('dist/index.cjs, fence ' + lease.fence);
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
`;

/** The same source for check.ts (ESM) and check.cts (CJS): only the module format differs. */
const TS_CHECK = `import { createLocks, LockError, type Locks } from 'latchkey';
import type { Lease, AcquireOptions } from 'latchkey';

const options: AcquireOptions = { ttl: 1_000, wait: 0 };
const locks: Locks = createLocks();

export async function fenceOfOneLease(): Promise<number> {
  await using held = await locks.acquire('k', options);
  const lease: Lease = held;
  return lease.fence;
}

export function codeOf(error: unknown): string | undefined {
  return error instanceof LockError ? error.code : undefined;
}

// The types are real, not \`any\`: these must not compile.
// @ts-expect-error ttl is a number of milliseconds
export const wrongTtl: AcquireOptions = { ttl: '1s' };
export async function wrongFence(): Promise<void> {
  const lease = await locks.acquire('k');
  // @ts-expect-error fence is read-only
  lease.fence = 1;
}
`;

const TSCONFIG = (file) => ({
  compilerOptions: {
    module: 'NodeNext',
    moduleResolution: 'NodeNext',
    target: 'ES2022',
    lib: ['ES2022', 'esnext.disposable'],
    strict: true,
    noEmit: true,
    skipLibCheck: false,
    types: ['node'],
  },
  files: [file],
});

let failures = 0;
const tmp = mkdtempSync(join(tmpdir(), 'latchkey-pack-'));
try {
  setUp();
} catch (error) {
  failures++;
  console.log(`FAIL setup: ${error instanceof Error ? error.message : String(error)}`);
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
process.exitCode = failures === 0 ? 0 : 1;

/** Packs, installs, then runs the checks (a failed check is counted; a failed setup throws). */
function setUp() {
  const dist = ['index.js', 'index.cjs', 'index.d.ts', 'index.d.cts', 'cli.js'].map((f) => join(repo, 'dist', f));
  if (!dist.every((f) => existsSync(f))) {
    console.log('dist/ is incomplete: npm run build');
    run('npm', ['run', 'build'], repo);
  }

  const packed = JSON.parse(run('npm', ['pack', '--json', '--pack-destination', tmp], repo));
  const tarball = join(tmp, packed[0].filename);
  console.log(`packed ${basename(tarball)} (${packed[0].entryCount} files, ${Math.round(packed[0].size / 1024)} kB)`);

  const project = join(tmp, 'project');
  mkdirSync(join(project, 'cjs'), { recursive: true });
  writeJson(join(project, 'package.json'), { name: 'latchkey-pack-smoke', private: true, type: 'module' });
  const extras = ['ioredis', '@types/node'].map((name) => `${name}@${repoVersion(name) ?? 'latest'}`);
  run('npm', ['install', tarball, ...extras, '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error'], project);
  console.log(`installed it in ${project} with ${extras.join(', ')}`);

  writeFileSync(join(project, 'check.mjs'), ESM_CHECK);
  writeFileSync(join(project, 'check.cjs'), CJS_CHECK);
  writeFileSync(join(project, 'check.ts'), TS_CHECK);
  writeJson(join(project, 'tsconfig.json'), TSCONFIG('check.ts'));
  writeJson(join(project, 'cjs', 'package.json'), { type: 'commonjs' });
  writeFileSync(join(project, 'cjs', 'check.cts'), TS_CHECK);
  writeJson(join(project, 'cjs', 'tsconfig.json'), TSCONFIG('check.cts'));

  const tsVersion = JSON.parse(readFileSync(join(repo, 'node_modules', 'typescript', 'package.json'), 'utf8')).version;
  check('ESM import', () => run(process.execPath, ['check.mjs'], project));
  check('CJS require', () => run(process.execPath, ['check.cjs'], project));
  check(`TypeScript ${tsVersion} ESM (.ts, type: module)`, () => run(process.execPath, [tsc, '-p', 'tsconfig.json'], project) || 'no errors');
  check(`TypeScript ${tsVersion} CJS (.cts, CommonJS)`, () => run(process.execPath, [tsc, '-p', 'tsconfig.json'], join(project, 'cjs')) || 'no errors');
  // The bin, as `npx latchkey` runs it from the installed package.
  check('npx latchkey --version', () => run('npx', ['--no-install', 'latchkey', '--version'], project));
}

/** Runs one check and prints `ok` or `FAIL` with the last line of its output. */
function check(name, fn) {
  try {
    const out = fn().trim().split('\n').at(-1);
    console.log(`ok   ${name}: ${out}`);
  } catch (error) {
    failures++;
    console.log(`FAIL ${name}:\n${indent(error instanceof Error ? error.message : String(error))}`);
  }
}

/** Runs a command; returns its stdout, or throws with its output when it fails. */
function run(command, args, cwd) {
  const result = spawnSync(command, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  if (result.error) throw new Error(`${command}: ${result.error.message}`);
  if (result.status !== 0) {
    const output = [result.stdout, quiet(result.stderr)].filter((s) => s.trim()).join('\n').trim();
    throw new Error(`${basename(command)} ${args.map((a) => basename(a)).join(' ')} exited with ${result.status ?? result.signal}\n${output}`);
  }
  return result.stdout;
}

/** The version of `name` installed in the repo, if any. */
function repoVersion(name) {
  const file = join(repo, 'node_modules', name, 'package.json');
  return existsSync(file) ? JSON.parse(readFileSync(file, 'utf8')).version : undefined;
}

function writeJson(file, value) {
  writeFileSync(file, `${JSON.stringify(value, null, 2)}\n`);
}

/** Drops npm's harmless warnings about this machine's config. */
function quiet(stderr) {
  return stderr
    .split('\n')
    .filter((line) => !/^npm warn Unknown (user|env) config/i.test(line))
    .join('\n');
}

function indent(text) {
  return text
    .split('\n')
    .map((line) => `    ${line}`)
    .join('\n');
}
