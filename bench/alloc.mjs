// Bytes allocated per sequential acquire+release, one node (`{ redis }`) and five (`{ redlock }`),
// on private redis-servers: V8's sampling heap profiler (every 512 bytes on average, objects
// collected by minor and major GCs included), over PAIRS pairs (default 5,000) after a warm-up,
// with the functions that allocate most. Allocation sets how often the young-generation GC runs,
// and a pair that meets one (0.3-0.8 ms here) lands in the p99. Usage: npm run build && node
// bench/alloc.mjs (LATCHKEY_DIST: another build's dist/index.js, inside the repository;
// BENCH_CLIENTS=6|5: the ioredis major, lib/clients.mjs, 6 by default).
import { Session } from 'node:inspector/promises';
import { clientsLine, importIoredis } from './lib/clients.mjs';
import { latchkeyModule } from './lib/latchkey-module.mjs';
import { startRedisServer } from './lib/redis-server.mjs';

const PAIRS = Number(process.env.PAIRS || 5000);
const TTL = 10_000;
const { Redis } = await importIoredis();
console.log(clientsLine(['ioredis']));
const { createLocks } = await import(latchkeyModule());
const servers = await Promise.all(Array.from({ length: 5 }, () => startRedisServer()));
const clients = servers.map((s) => new Redis(s.port, '127.0.0.1'));
const session = new Session();
session.connect();
try {
  await Promise.all(clients.map((c) => c.ping()));
  for (const [label, options] of [
    ['1 node', { redis: clients[0], prefix: 'alloc1:' }],
    ['5 nodes', { redlock: clients, prefix: 'alloc5:' }],
  ]) {
    const locks = createLocks(options);
    for (let i = 0; i < 1000; i++) await (await locks.acquire('k', { ttl: TTL })).release(); // warm-up
    await session.post('HeapProfiler.startSampling', { samplingInterval: 512, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
    for (let i = 0; i < PAIRS; i++) await (await locks.acquire('k', { ttl: TTL })).release();
    const { profile } = await session.post('HeapProfiler.stopSampling');
    const bySite = new Map();
    const walk = (node) => {
      const { functionName, url, lineNumber } = node.callFrame;
      const site = `${functionName || '(anonymous)'} ${url.split('/').slice(-3).join('/')}:${lineNumber + 1}`;
      if (node.selfSize) bySite.set(site, (bySite.get(site) ?? 0) + node.selfSize);
      for (const child of node.children) walk(child);
    };
    walk(profile.head);
    const total = [...bySite.values()].reduce((a, b) => a + b, 0);
    console.log(`\n${label}: ${(total / PAIRS / 1024).toFixed(1)} KB per acquire+release (${PAIRS} pairs)`);
    for (const [site, bytes] of [...bySite].sort((a, b) => b[1] - a[1]).slice(0, Number(process.env.TOP || 8))) console.log(`  ${(bytes / PAIRS).toFixed(0).padStart(6)} B  ${site}`);
    await locks.close();
  }
} finally {
  session.disconnect();
  for (const c of clients) c.disconnect();
  await Promise.all(servers.map((s) => s.stop()));
}
