// A/B (or A/B/C…) of latchkey builds on the uncontended path, optionally next to redis-semaphore:
// 64 concurrent acquire+release loops on 64 keys, for BENCH_SECONDS (default 3) per pass, passes
// alternating between the contenders (ROUNDS, default 4, each), each pass in its own process, on
// one private redis-server. Prints each pass and the medians: pairs per second, and CPU per pair
// in µs: the Node process's user and system time (process.cpuUsage) and the redis-server's
// (/proc/<pid>/stat, 10 ms ticks). On a machine shared with other work, pairs/s moves with the
// load; CPU per pair much less.
// Usage: node bench/ab.mjs <contender> <contender> [...]
//   a contender is a path to a build's dist/index.js, `redis-semaphore` (its Mutex, same loop),
//   `smallest` (the smallest correct lock on ioredis: SET NX PX with a random token, drawn as
//   latchkey draws its tokens, then a compare-and-delete script, nothing else),
//   `smallest-coalesced` (the same, with the commands of a turn written together, 16 at most, as
//   latchkey writes them): what a lock can reach on this client and machine; `smallest-fenced`
//   and `smallest-fenced-coalesced`: the same, but the SET NX PX is run by a script that also
//   issues a fencing token (INCR of a counter key): the smallest lock with fences;
//   `latchkey-scripts`: latchkey's own calls for a lone caller (acquire.lua with two keys and two
//   arguments, release-key.lua with the queue key: src/lua) on the bare client, coalesced, with
//   tokens as latchkey's: what latchkey's protocol costs without latchkey's layers (the counter
//   that outlives the lease by a day and fences from the server's clock cost acquire.lua a TIME
//   and a SET ... PX ... GET where the smallest fenced lock has one INCR; the release checks the
//   queue key: three commands each, against two)
//   e.g. git stash && npm run build && cp -r dist bench/dist-a && git stash pop && npm run build
//        node bench/ab.mjs bench/dist-a/index.js dist/index.js redis-semaphore
//   (a copy of dist must sit inside the repository, so that it finds ioredis in node_modules)
//   `peer:<adapter>/<variant>`: a library through its bench adapter (bench/adapters, each with its
//   own client of the BENCH_CLIENTS major), e.g. peer:redlock-v4/default, peer:latchkey/default:
//   every peer in the same run, passes interleaved
//   AB_BACKEND=memory runs the latchkey contenders on the in-memory backend: the cost of
//   latchkey's own layers without a driver or a round trip.
//   BENCH_CLIENTS=6|5: the ioredis major every contender gets (lib/clients.mjs, 6 by default).
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { clientsLine, importIoredis } from './lib/clients.mjs';
import { processCpu } from './lib/process-cpu.mjs';
import { startRedisServer } from './lib/redis-server.mjs';
import { median } from './lib/stats.mjs';
import { DELETE_IF_EQUAL, SET_AND_CLOCK_FENCE, SET_AND_FENCE } from './lib/smallest-lock.mjs';

const here = fileURLToPath(import.meta.url);
const SECONDS = Number(process.env.BENCH_SECONDS || 3);
const ROUNDS = Number(process.env.ROUNDS || 4);
const LOOPS = 64;

async function lockLoop(contender, port) {
  if (contender.startsWith('peer:')) {
    // A peer library (or latchkey itself) through its bench adapter, with its own client(s).
    const [name, variant = 'default'] = contender.slice('peer:'.length).split('/');
    const { create } = await import(`./adapters/${name}.mjs`);
    const lib = await create({ url: `redis://127.0.0.1:${port}`, key: 'k0', variant, ttl: 10_000 });
    await lib.ping();
    return { pair: async (key) => lib.release(await lib.acquire(key)), close: () => lib.close() };
  }
  const { Redis } = await importIoredis();
  const client = new Redis(Number(port), '127.0.0.1');
  await client.ping();
  if (contender === 'redis-semaphore') {
    const { Mutex } = await import('redis-semaphore');
    return {
      pair: async (key) => {
        const mutex = new Mutex(client, key, { lockTimeout: 10_000, refreshInterval: 0 });
        await mutex.acquire();
        await mutex.release();
      },
      close: async () => client.disconnect(),
    };
  }
  if (contender.startsWith('smallest') || contender === 'latchkey-scripts') {
    const { randomBytes, randomFillSync } = await import('node:crypto');
    const { readFileSync } = await import('node:fs');
    // Tokens as latchkey draws them: 128 bits each from a 4 KiB pool of CSPRNG bytes.
    const pool = Buffer.allocUnsafe(4096);
    let used = pool.length;
    const nextToken = () => {
      if (used === pool.length) {
        randomFillSync(pool);
        used = 0;
      }
      used += 16;
      return pool.toString('hex', used - 16, used);
    };
    if (contender === 'latchkey-scripts') {
      const lua = (file) => readFileSync(new URL(`../src/lua/${file}`, import.meta.url), 'utf8');
      client.defineCommand('latchkeyAcquire', { numberOfKeys: 2, lua: lua('acquire.lua') });
      client.defineCommand('latchkeyRelease', { numberOfKeys: 2, lua: lua('release-key.lua') });
      const beforeSend = coalescer(client);
      const tag = randomBytes(4).toString('hex');
      return {
        pair: async (key) => {
          const lock = `ab:{${key}}`;
          const token = tag + nextToken();
          beforeSend();
          const fence = await client.latchkeyAcquire(lock, `${lock}:fence`, token, '10000');
          if (typeof fence !== 'number') throw new Error(`${key} is held`);
          beforeSend();
          await client.latchkeyRelease(lock, `${lock}:queue`, token);
        },
        close: async () => client.disconnect(),
      };
    }
    client.defineCommand('deleteIfEqual', { numberOfKeys: 1, lua: DELETE_IF_EQUAL });
    client.defineCommand('setIfFreeAndFence', { numberOfKeys: 2, lua: contender.startsWith('smallest-clock-fenced') ? SET_AND_CLOCK_FENCE : SET_AND_FENCE });
    const beforeSend = contender.endsWith('-coalesced') ? coalescer(client) : () => {};
    const fenced = contender.startsWith('smallest-fenced') || contender.startsWith('smallest-clock-fenced');
    return {
      pair: async (key) => {
        const token = nextToken();
        beforeSend();
        const taken = fenced ? await client.setIfFreeAndFence(key, `${key}:fence`, token, 10_000) : await client.set(key, token, 'PX', 10_000, 'NX');
        if (taken === null) throw new Error(`${key} is held`);
        beforeSend();
        await client.deleteIfEqual(key, token);
      },
      close: async () => client.disconnect(),
    };
  }
  const { createLocks } = await import(contender);
  // AB_BACKEND=memory: latchkey's own cost alone, on its in-memory backend (no Redis round trip).
  const locks = process.env.AB_BACKEND === 'memory' ? createLocks({ prefix: 'ab:' }) : createLocks({ redis: client, prefix: 'ab:' });
  return {
    pair: async (key) => {
      const lease = await locks.acquire(key, { ttl: 10_000 });
      await lease.release();
    },
    close: async () => {
      await locks.close();
      client.disconnect();
    },
  };
}

/** Corks the client's socket for the rest of the turn, uncorking every 16 commands (as src/client/coalesce-writes.ts). */
function coalescer(client) {
  let corked;
  let waiting = 0;
  return () => {
    if (corked) {
      if (++waiting <= 16) return;
      corked.uncork();
      corked.cork();
      waiting = 1;
      return;
    }
    corked = client.stream;
    corked.cork();
    waiting = 1;
    process.nextTick(() => {
      const s = corked;
      corked = undefined;
      s.uncork();
    });
  };
}

if (process.argv[2] === '--pass') {
  const [, , , contender, port, serverPid] = process.argv;
  const loop = await lockLoop(contender, port);
  let pairs = 0;
  const end = performance.now() + SECONDS * 1000;
  const before = process.cpuUsage();
  const serverBefore = processCpu(serverPid);
  await Promise.all(
    Array.from({ length: LOOPS }, async (_, i) => {
      while (performance.now() < end) {
        await loop.pair(`k${i}`);
        pairs++;
      }
    }),
  );
  const used = process.cpuUsage(before);
  const serverAfter = processCpu(serverPid);
  console.log(
    JSON.stringify({
      pairsPerSecond: pairs / SECONDS,
      userMicrosPerPair: used.user / pairs,
      systemMicrosPerPair: used.system / pairs,
      serverUserMicrosPerPair: (serverAfter.user - serverBefore.user) / pairs,
      serverSystemMicrosPerPair: (serverAfter.system - serverBefore.system) / pairs,
    }),
  );
  await loop.close();
} else {
  const names = process.argv.slice(2);
  const named = new Set(['redis-semaphore', 'smallest', 'smallest-coalesced', 'smallest-fenced', 'smallest-fenced-coalesced', 'smallest-clock-fenced', 'smallest-clock-fenced-coalesced', 'latchkey-scripts']);
  if (names.length < 2) throw new Error(`usage: node bench/ab.mjs <contender> <contender> [...], a contender: a build's dist/index.js or one of ${[...named].join(', ')}`);
  const contenders = names.map((p) => (named.has(p) || p.startsWith('peer:') ? p : pathToFileURL(path.resolve(p)).href));
  console.log(clientsLine(['ioredis']));
  const server = await startRedisServer();
  const results = contenders.map(() => []);
  const label = (i) => String.fromCharCode(65 + i);
  const line = (r) =>
    `${Math.round(r.pairsPerSecond)} pairs/s  node ${r.userMicrosPerPair.toFixed(1)} user + ${r.systemMicrosPerPair.toFixed(1)} sys, ` +
    `redis ${r.serverUserMicrosPerPair.toFixed(1)} user + ${r.serverSystemMicrosPerPair.toFixed(1)} sys µs/pair`;
  try {
    for (let round = 0; round < ROUNDS; round++) {
      for (const [i, contender] of contenders.entries()) {
        const out = JSON.parse(
          execFileSync(process.execPath, [here, '--pass', contender, String(server.port), String(server.pid)], { encoding: 'utf8' }),
        );
        results[i].push(out);
        console.log(`${label(i)}  ${line(out)}`);
      }
    }
  } finally {
    await server.stop();
  }
  const medians = [];
  for (const [i, rs] of results.entries()) {
    const m = Object.fromEntries(Object.keys(rs[0]).map((k) => [k, median(rs.map((r) => r[k]))]));
    medians.push(m);
    console.log(`median ${label(i)}: ${line(m)}  (${names[i]})`);
  }
  // The first contender's medians against each other's, as ratios (the goals of issue 20 are ratios).
  const cpu = (m, who) => (who === 'node' ? m.userMicrosPerPair + m.systemMicrosPerPair : m.serverUserMicrosPerPair + m.serverSystemMicrosPerPair);
  for (let i = 1; i < medians.length; i++) {
    const [a, b] = [medians[0], medians[i]];
    console.log(
      `ratio A / ${label(i)}: pairs/s ${(a.pairsPerSecond / b.pairsPerSecond).toFixed(2)}x, Node CPU per pair ${(cpu(a, 'node') / cpu(b, 'node')).toFixed(2)}x, ` +
        `Redis CPU per pair ${(cpu(a, 'redis') / cpu(b, 'redis')).toFixed(2)}x  (${names[0]} / ${names[i]})`,
    );
  }
}
