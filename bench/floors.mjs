// The floors under two of latchkey's latency goals on this machine: what the smallest correct lock
// costs, next to latchkey, in one run. Sequential acquire+release pairs on a free key, in 250 ms
// slices interleaved between the contenders (so machine noise falls on all of them alike), for
// BENCH_SECONDS (default 6), on private redis-servers:
//   one node    2 x PING; the smallest correct lock on Redis 7.0 (SET NX PX with a random token,
//               then a compare-and-delete script: Redis 7.0 has no single command for it); the
//               same with its SET NX PX run by a one-line script (what one script call costs);
//               the smallest lock with latchkey's fence guarantee (SET NX PX, then a fence of
//               max(server TIME in µs, last + 1) in one script: lib/smallest-lock.mjs); latchkey
//   five nodes  the same over five masters, each operation sent to all five and done when three
//               answered (a majority): 2 x PING, the smallest lock, latchkey's redlock
// Prints p50 and p99 of each, its ratio to 2 x PING (one node) and five nodes / one node, and the
// redis-servers' CPU time per pair, summed over the nodes (/proc, around each slice; Linux), and
// this process's (the client side). Usage: npm run build && node bench/floors.mjs
// FLOORS_PEERS: peer libraries measured on one node in the same slices, through their bench
// adapters (bench/adapters, each with its own client), default `redis-semaphore/default` (the
// peer with the cheapest sequential pair in scenario 4); `none` for none. The last lines print
// latchkey's one-node p50 over each floor's and each peer's.
// BENCH_CLIENTS=6|5: the ioredis major (lib/clients.mjs, 6 by default); LATCHKEY_DIST: another build;
// BENCH_WARMUP_MS: untimed pairs per contender before the slices (default 1000 ms).
import { clientsLine, importIoredis } from './lib/clients.mjs';
import { latchkeyModule } from './lib/latchkey-module.mjs';
import { processCpu } from './lib/process-cpu.mjs';
import { startRedisServer } from './lib/redis-server.mjs';
import { defineSmallestLock, smallestLock, twoPings } from './lib/floor-locks.mjs';
import { summarize } from './lib/stats.mjs';

const SECONDS = Number(process.env.BENCH_SECONDS || 6);
const SLICE_MS = 250;
const WARMUP_MS = Number(process.env.BENCH_WARMUP_MS || 1000);
const TTL = 10_000;
const { Redis } = await importIoredis();
const { createLocks } = await import(latchkeyModule());
process.stderr.write(`[floors] ${clientsLine(['ioredis'])}\n`);

const servers = await Promise.all(Array.from({ length: 5 }, () => startRedisServer()));
const clients = servers.map((s) => new Redis(s.port, '127.0.0.1'));
try {
  await Promise.all(clients.map((c) => c.ping()));
  for (const c of clients) defineSmallestLock(c);
  const single = createLocks({ redis: clients[0], prefix: 'floor1:' });
  const redlock = createLocks({ redlock: clients, prefix: 'floor5:' });

  const peerNames = (process.env.FLOORS_PEERS ?? 'redis-semaphore/default').split(',').map((p) => p.trim()).filter((p) => p && p !== 'none');
  const peers = [];
  for (const spec of peerNames) {
    const [name, variant = 'default'] = spec.split('/');
    const { create } = await import(`./adapters/${name}.mjs`);
    const lib = await create({ url: `redis://127.0.0.1:${servers[0].port}`, key: 'floor1:peer', variant, ttl: TTL });
    peers.push({ label: `1 node: ${name} ${variant}`, lib });
  }

  const minimalLock = async (nodes, key, how) => (await smallestLock(nodes, key, how))();
  const contenders = {
    '1 node: 2 x PING': () => twoPings(clients.slice(0, 1)),
    '1 node: smallest lock': () => minimalLock(clients.slice(0, 1), 'floor1:min'),
    '1 node: smallest lock, SET NX in a script': () => minimalLock(clients.slice(0, 1), 'floor1:min', 'scripted'),
    '1 node: smallest lock with a clock fence': () => minimalLock(clients.slice(0, 1), 'floor1:min', 'clock-fenced'),
    '1 node: latchkey': async () => (await single.acquire('k', { ttl: TTL })).release(),
    ...Object.fromEntries(peers.map(({ label, lib }) => [label, async () => lib.release(await lib.acquire('floor1:peer'))])),
    '5 nodes: 2 x PING': () => twoPings(clients),
    '5 nodes: smallest lock': () => minimalLock(clients, 'floor5:min'),
    '5 nodes: smallest lock, SET NX in a script': () => minimalLock(clients, 'floor5:min', 'scripted'),
    '5 nodes: smallest lock with a clock fence': () => minimalLock(clients, 'floor5:min', 'clock-fenced'),
    '5 nodes: latchkey': async () => (await redlock.acquire('k', { ttl: TTL })).release(),
  };
  const samples = Object.fromEntries(Object.keys(contenders).map((name) => [name, []]));
  // The redis-servers' CPU time (user + system, /proc/<pid>/stat, 10 ms ticks) around each slice, per contender.
  const serverCpu = Object.fromEntries(Object.keys(contenders).map((name) => [name, 0]));
  // This process's CPU time (the client's side: the lock's code, ioredis, the socket calls), per contender.
  const clientCpu = Object.fromEntries(Object.keys(contenders).map((name) => [name, 0]));
  const cpuOfServers = () =>
    servers.reduce((sum, s) => {
      const cpu = processCpu(s.pid);
      return sum + cpu.user + cpu.system;
    }, 0);
  // Warm-up: WARMUP_MS of pairs each, so that V8 has optimized each contender's code before it is
  // timed (200 pairs left latchkey's, the most code, to be compiled inside its first slices: its
  // p99 was 1.4-2.1 ms then, and 0.22 after a longer warm-up).
  for (const run of Object.values(contenders)) {
    const warm = performance.now() + WARMUP_MS;
    while (performance.now() < warm) await run();
  }
  const end = performance.now() + SECONDS * 1000;
  while (performance.now() < end) {
    for (const [name, run] of Object.entries(contenders)) {
      const before = cpuOfServers();
      const ownBefore = process.cpuUsage();
      const sliceEnd = performance.now() + SLICE_MS;
      while (performance.now() < sliceEnd) {
        const t = performance.now();
        await run();
        samples[name].push(performance.now() - t);
      }
      serverCpu[name] += cpuOfServers() - before;
      const own = process.cpuUsage(ownBefore);
      clientCpu[name] += own.user + own.system;
    }
  }
  const stat = (name) => summarize(samples[name]);
  const ping1 = stat('1 node: 2 x PING');
  console.log(`${clientsLine(['ioredis'])}, for every contender\n`);
  console.log('| pair (sequential) | p50 ms | p99 ms | p50 / 2 x PING (1 node) | 5 nodes / 1 node p50 | 5 nodes / 1 node p99 | redis-server CPU µs per pair, all nodes | client CPU µs per pair | pairs |');
  console.log('| --- | --: | --: | --: | --: | --: | --: | --: | --: |');
  for (const name of Object.keys(contenders)) {
    const s = stat(name);
    const five = name.startsWith('5');
    const one = five ? stat(name.replace('5 nodes', '1 node')) : undefined;
    console.log(
      `| ${name} | ${s.p50.toFixed(3)} | ${s.p99.toFixed(3)} | ${(s.p50 / ping1.p50).toFixed(2)} | ${one ? (s.p50 / one.p50).toFixed(2) : ''} | ${one ? (s.p99 / one.p99).toFixed(2) : ''} | ${(serverCpu[name] / s.n).toFixed(0)} | ${(clientCpu[name] / s.n).toFixed(0)} | ${s.n} |`,
    );
  }
  const mine = stat('1 node: latchkey').p50;
  console.log('');
  for (const name of Object.keys(contenders).filter((n) => n.startsWith('1 node') && n !== '1 node: latchkey')) {
    console.log(`latchkey one-node p50 / ${name.slice('1 node: '.length)}: ${(mine / stat(name).p50).toFixed(2)}x`);
  }
  await single.close();
  for (const { lib } of peers) await lib.close();
  await redlock.close();
} finally {
  for (const c of clients) c.disconnect();
  await Promise.all(servers.map((s) => s.stop()));
}
