// Pack smoke test: installs the package the way a user gets it (the `npm pack` tarball, in a fresh
// project outside the repo, with `npm install <tarball> ioredis redis`: the registry's latest
// clients) and checks that it installs cleanly, loads, type-checks and runs there:
//   0. The install prints no peer-dependency warning (ERESOLVE, "peer"), it got the registry's
//      latest ioredis and redis (a peer range can hold one back without a word: redis ^5 did),
//      `npm ls` finds the tree valid, and there is exactly one copy of ioredis.
//   1. ESM:  import { createLocks, LockError } from 'latchkey'   -> dist/index.js
//   2. CJS:  const { createLocks } = require('latchkey')          -> dist/index.cjs
//      Both acquire and release a lock on the in-memory backend (fence is a number), check that a
//      validation error is a LockError, and that a borrowed ioredis client is recognised (no
//      connection is made).
//   3. TypeScript: `await using` on a lease and `import type { Lease, AcquireOptions }`, compiled
//      with the repo's own typescript (tsc --noEmit, module NodeNext, target ES2022, lib ES2022 +
//      esnext.disposable, strict, declarations checked too): once as ESM (.ts in a "type": "module"
//      package, types from index.d.ts) and once as CJS (.cts in a CommonJS package, index.d.cts).
//      It also passes every client type latchkey takes: ioredis 6's Redis<'resp3'> and its
//      duplicate(), Cluster<'resp3'>, node-redis clients under RESP2 and RESP3.
//   4. The README's first example (the first ```ts block after `<!-- first-example -->`), compiled
//      with tsc and run against a redis-server this script starts on a free port (and stops, by
//      pid): through ioredis as written, through node-redis (`await createClient({ url }).connect()`)
//      and through `{ url }`. Each must finish within EXAMPLE_MS.
// The project also gets @types/node at the repo's version. redis-server must be on the PATH.
//
// Run: node scripts/pack-smoke.mjs   (part of `npm run test:pack`; builds dist/ first if missing)
// Prints one line per check; exit code 1 if any failed. The temporary directory is always removed.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
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
import { Cluster, Redis } from 'ioredis';
import { createClient } from 'redis';

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

// Every client type is taken, whatever its reply mapping or protocol (compiled, never run).
export function clients(): Locks[] {
  const resp3: Redis<'resp3'> = new Redis({ replyMapping: 'resp3', lazyConnect: true });
  const cluster: Cluster<'resp3'> = new Cluster([{ port: 7000 }], { lazyConnect: true, redisOptions: { replyMapping: 'resp3' } });
  return [
    createLocks({ redis: resp3 }),
    createLocks({ redis: resp3.duplicate() }),
    createLocks({ redis: new Redis({ protocol: 2 }) }),
    createLocks({ redis: cluster }),
    createLocks({ redis: createClient({ RESP: 3 }) }),
    createLocks({ redis: createClient({ RESP: 2 }) }),
    createLocks({ redlock: [resp3, new Redis(), createClient()] }),
  ];
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

/** How long the README's example may take on each client, ms: it waits for nothing. */
const EXAMPLE_MS = 5000;

let failures = 0;
const tmp = mkdtempSync(join(tmpdir(), 'latchkey-pack-'));
let redisServer;
try {
  await setUp();
} catch (error) {
  failures++;
  console.log(`FAIL setup: ${error instanceof Error ? error.message : String(error)}`);
} finally {
  if (redisServer) await stopRedis(redisServer);
  rmSync(tmp, { recursive: true, force: true });
}
process.exitCode = failures === 0 ? 0 : 1;

/** Packs, installs, then runs the checks (a failed check is counted; a failed setup throws). */
async function setUp() {
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
  // As a user would: the clients unversioned (the registry's latest), warnings shown.
  const types = `@types/node@${repoVersion('@types/node') ?? 'latest'}`;
  const install = runAll('npm', ['install', tarball, 'ioredis', 'redis', types, '--no-audit', '--no-fund'], project);
  const installed = (name) => JSON.parse(readFileSync(join(project, 'node_modules', name, 'package.json'), 'utf8')).version;
  console.log(`installed it in ${project} with ioredis ${installed('ioredis')}, redis ${installed('redis')}, ${types}`);

  writeFileSync(join(project, 'check.mjs'), ESM_CHECK);
  writeFileSync(join(project, 'check.cjs'), CJS_CHECK);
  writeFileSync(join(project, 'check.ts'), TS_CHECK);
  writeJson(join(project, 'tsconfig.json'), TSCONFIG('check.ts'));
  writeJson(join(project, 'cjs', 'package.json'), { type: 'commonjs' });
  writeFileSync(join(project, 'cjs', 'check.cts'), TS_CHECK);
  writeJson(join(project, 'cjs', 'tsconfig.json'), TSCONFIG('check.cts'));

  check('npm install: no peer-dependency warning', () => {
    const warnings = quiet(install).split('\n').filter((line) => /ERESOLVE|peer/i.test(line));
    if (warnings.length > 0) throw new Error(warnings.join('\n'));
    return 'none';
  });
  check('the registry\'s latest clients, not older ones a peer range held back', () => {
    const latest = (name) => run('npm', ['view', name, 'dist-tags.latest'], project).trim();
    const behind = ['ioredis', 'redis'].filter((name) => installed(name) !== latest(name));
    if (behind.length > 0) throw new Error(behind.map((name) => `${name} ${installed(name)} installed, ${latest(name)} is the latest`).join('\n'));
    return `ioredis ${installed('ioredis')}, redis ${installed('redis')}`;
  });
  check('npm ls: a valid tree with one ioredis', () => {
    run('npm', ['ls', '--all'], project); // exits non-zero on an invalid, missing or extraneous package
    const copies = run('npm', ['ls', 'ioredis', '--all', '--parseable'], project)
      .split('\n')
      .filter((line) => /[\\/]node_modules[\\/]ioredis$/.test(line.trim()));
    if (copies.length !== 1) throw new Error(`${copies.length} copies of ioredis:\n${copies.join('\n')}`);
    return `ioredis ${installed('ioredis')} once`;
  });

  check('what a library user installs: two small dependencies besides the client (the command\'s libraries are bundled in its file)', () => {
    const manifest = JSON.parse(readFileSync(join(project, 'node_modules', 'latchkey', 'package.json'), 'utf8'));
    const dependencies = Object.keys(manifest.dependencies ?? {});
    // cluster-key-slot: the slot of a key (batched renewals on a Cluster); ioredis and node-redis install it too.
    if (dependencies.join() !== '@opentelemetry/api,cluster-key-slot') throw new Error(`dependencies: ${dependencies.join(', ')}`);
    const tree = run('npm', ['ls', '--all', '--parseable'], project).split('\n').filter((line) => line.includes('node_modules'));
    return `${dependencies.join(', ')}; ${packed[0].entryCount} files, ${Math.round(packed[0].unpackedSize / 1024)} kB unpacked; ${tree.length} packages installed with ioredis and redis`;
  });

  const tsVersion = JSON.parse(readFileSync(join(repo, 'node_modules', 'typescript', 'package.json'), 'utf8')).version;
  check('ESM import', () => run(process.execPath, ['check.mjs'], project));
  check('CJS require', () => run(process.execPath, ['check.cjs'], project));
  check(`TypeScript ${tsVersion} ESM (.ts, type: module)`, () => run(process.execPath, [tsc, '-p', 'tsconfig.json'], project) || 'no errors');
  check(`TypeScript ${tsVersion} CJS (.cts, CommonJS)`, () => run(process.execPath, [tsc, '-p', 'tsconfig.json'], join(project, 'cjs')) || 'no errors');
  // The bin, as `npx latchkey` runs it from the installed package.
  check('npx latchkey --version', () => run('npx', ['--no-install', 'latchkey', '--version'], project));

  // The README's first example, on a server of our own.
  redisServer = await startRedis();
  const examples = readmeExamples(readFileSync(join(repo, 'README.md'), 'utf8'));
  const dir = join(project, 'readme');
  mkdirSync(dir);
  for (const [name, source] of Object.entries(examples)) writeFileSync(join(dir, `${name}.ts`), source);
  writeJson(join(dir, 'tsconfig.json'), {
    compilerOptions: { ...TSCONFIG('').compilerOptions, noEmit: false, outDir: 'out' },
    files: Object.keys(examples).map((name) => `${name}.ts`),
  });
  const compiled = tryRun(() => run(process.execPath, [tsc, '-p', 'tsconfig.json'], dir));
  for (const name of Object.keys(examples)) {
    check(`README example through ${name}`, () => {
      if (compiled instanceof Error) throw compiled;
      const env = { ...process.env, REDIS_PORT: String(redisServer.port), REDIS_URL: `redis://127.0.0.1:${redisServer.port}` };
      const started = performance.now();
      const out = run(process.execPath, [join('out', `${name}.js`)], dir, { env, timeout: 4 * EXAMPLE_MS });
      const ms = Math.round(performance.now() - started);
      if (ms > EXAMPLE_MS) throw new Error(`took ${ms} ms (more than ${EXAMPLE_MS}): it waited for something\n${out}`);
      return `${out.trim()} in ${ms} ms`;
    });
  }
}

/**
 * The README's first example (the first \`\`\`ts block after its \`<!-- first-example -->\` marker),
 * made runnable three ways: through ioredis as written (it reads REDIS_URL), through node-redis,
 * and through \`{ url }\`, as its comment says. Each prints the fence of its lease.
 */
function readmeExamples(readme) {
  const marker = readme.indexOf('<!-- first-example -->');
  const block = /\n```ts\n([\s\S]*?)\n```/.exec(readme.slice(marker));
  if (marker < 0 || !block) throw new Error('README.md: no ```ts block after <!-- first-example -->');
  const example = block[1];
  const importLine = "import { Redis } from 'ioredis';";
  const connect = "new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379')";
  const borrow = 'createLocks({ redis })';
  const disconnect = 'redis.disconnect();';
  for (const expected of [importLine, connect, borrow, 'await locks.close();', disconnect]) {
    if (!example.includes(expected)) throw new Error(`README.md's first example no longer contains \`${expected}\`: update scripts/pack-smoke.mjs`);
  }
  return {
    ioredis: example,
    'node-redis': example
      .replace(importLine, "import { createClient } from 'redis';")
      .replace(connect, "await createClient({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' }).connect()")
      .replace(disconnect, 'await redis.close();'),
    url: example
      .replace(importLine, '')
      .replace(/\nconst redis = .*\n/, '\n')
      .replace(borrow, 'createLocks({ url: process.env.REDIS_URL! })')
      .replace(disconnect, ''),
  };
}

/** A redis-server on a free loopback port, without persistence. */
async function startRedis() {
  const port = await new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  await new Promise((resolve, reject) => {
    const onData = (data) => {
      output += data.toString();
      if (/Ready to accept connections/.test(output)) resolve();
    };
    child.stdout.on('data', onData);
    child.on('error', (error) => reject(new Error(`redis-server: ${error.message} (is it on the PATH?)`)));
    child.on('exit', (code) => reject(new Error(`redis-server exited with ${code}:\n${output}`)));
  });
  return { port, child };
}

async function stopRedis({ child }) {
  if (child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}

function tryRun(fn) {
  try {
    return fn();
  } catch (error) {
    return error instanceof Error ? error : new Error(String(error));
  }
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
function run(command, args, cwd, options = {}) {
  return spawnChecked(command, args, cwd, options).stdout;
}

/** Runs a command; returns its stdout and stderr together (npm writes its warnings to either), or throws when it fails. */
function runAll(command, args, cwd) {
  const result = spawnChecked(command, args, cwd);
  return `${result.stdout}\n${result.stderr}`;
}

function spawnChecked(command, args, cwd, options = {}) {
  const result = spawnSync(command, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], ...options });
  if (result.error) throw new Error(`${command}: ${result.error.message}`);
  if (result.status !== 0) {
    const output = [result.stdout, quiet(result.stderr)].filter((s) => s.trim()).join('\n').trim();
    throw new Error(`${basename(command)} ${args.map((a) => basename(a)).join(' ')} exited with ${result.status ?? result.signal}\n${output}`);
  }
  return result;
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
