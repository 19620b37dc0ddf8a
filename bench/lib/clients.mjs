// Which Redis client majors every bench runs on: one switch, BENCH_CLIENTS.
//   BENCH_CLIENTS=6 (the default)  ioredis 6 and node-redis 6: what `npm install ioredis redis`
//                                  gives a user now (the packages `ioredis` and `redis`)
//   BENCH_CLIENTS=5                ioredis 5 and node-redis 5: the previous majors (the npm
//                                  aliases `ioredis5` and `redis5` in devDependencies)
// latchkey, every peer adapter and the harnesses' own connections take their client from here.
// The benches pass no protocol option, so each client speaks its major's default protocol: RESP3
// for ioredis 6 and node-redis 6, RESP2 for ioredis 5 (it has no RESP3) and node-redis 5.
// The client packages are imported on first use (node-redis takes about 250 ms to load): a worker
// process loads only the one its library needs.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

const MAJORS = {
  6: { ioredis: { package: 'ioredis', protocol: 'RESP3' }, nodeRedis: { package: 'redis', protocol: 'RESP3' } },
  5: { ioredis: { package: 'ioredis5', protocol: 'RESP2' }, nodeRedis: { package: 'redis5', protocol: 'RESP2' } },
};

const chosen = (process.env.BENCH_CLIENTS ?? '').trim() || '6';
if (!Object.hasOwn(MAJORS, chosen)) {
  throw new Error(`BENCH_CLIENTS must be 6 (ioredis 6 and node-redis 6, the default) or 5 (ioredis 5 and node-redis 5), got "${chosen}"`);
}
const major = Number(chosen);

/** One client: its display name, the npm package (or alias) it is imported from, its exact version, its protocol. */
function describe(name, { package: pkg, protocol }) {
  const { version } = JSON.parse(readFileSync(require.resolve(`${pkg}/package.json`), 'utf8'));
  if (Number.parseInt(version, 10) !== major) {
    throw new Error(`BENCH_CLIENTS=${major}: the package ${pkg} is ${name} ${version}, not ${major}.x (run npm install)`);
  }
  return { name, package: pkg, version, protocol };
}

/** The clients of this run, for the header of every bench and its result file. */
export const CLIENTS = Object.freeze({
  major,
  ioredis: describe('ioredis', MAJORS[major].ioredis),
  nodeRedis: describe('node-redis', MAJORS[major].nodeRedis),
});

/** "ioredis 6.0.0 (RESP3)", or with the alias it came from: "ioredis 5.11.1 (npm alias ioredis5, RESP2)". */
export function clientLabel(client) {
  const via = client.package === client.name || (client.name === 'node-redis' && client.package === 'redis') ? '' : `npm alias ${client.package}, `;
  return `${client.name} ${client.version} (${via}${client.protocol})`;
}

/**
 * One line for the top of a bench's output: "clients (BENCH_CLIENTS=6): ioredis 6.0.0 (RESP3), ...".
 * `which` lists the clients the bench uses: 'ioredis', 'nodeRedis'.
 */
export function clientsLine(which = ['ioredis', 'nodeRedis']) {
  return `clients (BENCH_CLIENTS=${major}): ${which.map((w) => clientLabel(CLIENTS[w])).join(', ')}`;
}

let ioredisModule;
let nodeRedisModule;

/** The chosen ioredis package's module (`const { Redis } = await importIoredis()`). */
export function importIoredis() {
  ioredisModule ??= import(CLIENTS.ioredis.package);
  return ioredisModule;
}

/** The chosen node-redis package's module (`const { createClient } = await importNodeRedis()`). */
export function importNodeRedis() {
  nodeRedisModule ??= import(CLIENTS.nodeRedis.package);
  return nodeRedisModule;
}
