// A/B of two latchkey builds on the uncontended path: 64 concurrent acquire+release loops on 64
// keys, for BENCH_SECONDS (default 3) per pass, passes alternating between the builds (ROUNDS,
// default 4, each), each pass in its own process, on a private redis-server. Prints each pass
// and the medians: pairs per second and user CPU µs per pair.
// Usage: node bench/ab.mjs <path to build A's dist/index.js> <path to build B's dist/index.js>
//   e.g. git stash && npm run build && cp -r dist /tmp/dist-a && git stash pop && npm run build
//        node bench/ab.mjs /tmp/dist-a/index.js dist/index.js
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { startRedisServer } from './lib/redis-server.mjs';

const here = fileURLToPath(import.meta.url);
const SECONDS = Number(process.env.BENCH_SECONDS || 3);
const ROUNDS = Number(process.env.ROUNDS || 4);

if (process.argv[2] === '--pass') {
  const [, , , build, port] = process.argv;
  const { Redis } = await import('ioredis');
  const { createLocks } = await import(build);
  const client = new Redis(Number(port), '127.0.0.1');
  const locks = createLocks({ redis: client, prefix: 'ab:' });
  let pairs = 0;
  const end = performance.now() + SECONDS * 1000;
  const before = process.cpuUsage();
  await Promise.all(
    Array.from({ length: 64 }, async (_, i) => {
      while (performance.now() < end) {
        const lease = await locks.acquire(`k${i}`, { ttl: 10_000 });
        await lease.release();
        pairs++;
      }
    }),
  );
  const used = process.cpuUsage(before);
  console.log(JSON.stringify({ pairsPerSecond: pairs / SECONDS, userMicrosPerPair: used.user / pairs }));
  await locks.close();
  client.disconnect();
} else {
  const builds = process.argv.slice(2, 4).map((p) => pathToFileURL(path.resolve(p)).href);
  if (builds.length !== 2) throw new Error('usage: node bench/ab.mjs <A dist/index.js> <B dist/index.js>');
  const server = await startRedisServer();
  const results = [[], []];
  try {
    for (let round = 0; round < ROUNDS; round++) {
      for (const [i, build] of builds.entries()) {
        const out = JSON.parse(execFileSync(process.execPath, [here, '--pass', build, String(server.port)], { encoding: 'utf8' }));
        results[i].push(out);
        console.log(`${'AB'[i]}  ${Math.round(out.pairsPerSecond)} pairs/s  ${out.userMicrosPerPair.toFixed(2)} user µs/pair`);
      }
    }
  } finally {
    await server.stop();
  }
  const median = (xs) => {
    const s = [...xs].sort((a, b) => a - b);
    return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  };
  for (const [i, rs] of results.entries()) {
    console.log(
      `median ${'AB'[i]}: ${Math.round(median(rs.map((r) => r.pairsPerSecond)))} pairs/s, ${median(rs.map((r) => r.userMicrosPerPair)).toFixed(2)} user µs/pair  (${process.argv[2 + i]})`,
    );
  }
}
