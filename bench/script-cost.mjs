// What latchkey's scripts cost Redis itself, next to the smallest scripts that do the same job:
// server time per call from `INFO commandstats` (the EVALSHA line: the time spent running the
// script, its calls included; not the network or the parsing of the request), pipelined calls on
// one private redis-server, minimum and median over ROUNDS rounds (default 9) of 4,000 calls.
//   grant        release.lua giving the lock to the queued waiter (a subscriber listens on its
//                inbox), against the ring's pass-on script (bench/ring.mjs: GET, SET, PUBLISH)
//   queue join   acquire.lua on a held lock, queuing the caller
//   lone pair    what a lone caller runs (its manager found the lock free and not contended
//                lately): acquire.lua with two keys and two arguments + release-key.lua with the
//                queue key, per pair, against the smallest fenced lock (SET NX PX and INCR in one
//                script, then compare-and-delete) and the smallest lock with latchkey's fence
//                guarantee (the fence max(server TIME, last + 1): lib/smallest-lock.mjs)
//   free pair    acquire.lua on a free lock + release.lua freeing it (the release of a manager
//                that saw the lock contended lately), per pair
//   Redlock node free pair  what one node of a Redlock runs per acquire+release: acquire.lua with
//                a fence floor + wake-release.lua, per pair; the floor is what the Redlock backend
//                offers when it took the lock last (the last fence + 1), its steady state
//   renewal      per lease, in calls of 500 held leases: extend-many.lua (the watchdog's batch),
//                against a GET and a PEXPIRE per lease (extend.lua's steps, 500 in one script)
//                and, the floor, a PEXPIRE per lease with no check of the token (not safe)
// ACQUIRE_LUA / RELEASE_LUA / RELEASE_KEY_LUA / WAKE_RELEASE_LUA: another version of the script file, to compare
// (e.g. from git show; it must take the same keys and arguments).
// Usage: node bench/script-cost.mjs (BENCH_CLIENTS=6|5: the ioredis major that sends the calls,
// lib/clients.mjs, 6 by default; the server time does not depend on it)
import fs from 'node:fs';
import { clientsLine, importIoredis } from './lib/clients.mjs';
import { startRedisServer } from './lib/redis-server.mjs';
import { PASS_ON } from './lib/ring.mjs';
import { DELETE_IF_EQUAL, SET_AND_CLOCK_FENCE, SET_AND_FENCE } from './lib/smallest-lock.mjs';

const ROUNDS = Number(process.env.ROUNDS || 9);
const CALLS = 4000;
const BATCH = 50;
const source = (file) => fs.readFileSync(new URL(file, import.meta.url), 'utf8');
const ACQUIRE = process.env.ACQUIRE_LUA ? fs.readFileSync(process.env.ACQUIRE_LUA, 'utf8') : source('../src/lua/acquire.lua');
const RELEASE = process.env.RELEASE_LUA ? fs.readFileSync(process.env.RELEASE_LUA, 'utf8') : source('../src/lua/release.lua');
const RELEASE_KEY = process.env.RELEASE_KEY_LUA ? fs.readFileSync(process.env.RELEASE_KEY_LUA, 'utf8') : source('../src/lua/release-key.lua');
const WAKE_RELEASE = process.env.WAKE_RELEASE_LUA ? fs.readFileSync(process.env.WAKE_RELEASE_LUA, 'utf8') : source('../src/lua/wake-release.lua');
const FENCE_TTL = String(10_000 + 24 * 60 * 60 * 1000); // the lease's ttl + the counter's retention
const COUNTER_START = 1_700_000_000_000_000; // a fence counter in µs, as a node's clock seeds it
const EXTEND_MANY = process.env.EXTEND_MANY_LUA ? fs.readFileSync(process.env.EXTEND_MANY_LUA, 'utf8') : source('../src/lua/extend-many.lua');
const GET_PEXPIRE = `local s = {}
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[i + 1] then redis.call('PEXPIRE', KEYS[i], ARGV[1]) s[i] = 1 else s[i] = 0 end
end
return s`;
const PEXPIRE_ONLY = `local s = {}
for i = 1, #KEYS do s[i] = redis.call('PEXPIRE', KEYS[i], ARGV[1]) end
return s`;
const RENEWED = 500; // leases a renewal call carries (MAX_BATCH)
const RENEWAL_CALLS = 200;
const token = (i) => i.toString(16).padStart(32, '0');
const k = '{k}';
const keys = [k, `${k}:fence`, `${k}:queue`, `${k}:alive`];

const { Redis } = await importIoredis();
console.log(clientsLine(['ioredis']));
const server = await startRedisServer();
const client = new Redis(server.port, '127.0.0.1');
const sub = new Redis(server.port, '127.0.0.1');
try {
  await sub.subscribe('p:inbox1');
  const sha = {};
  for (const [name, lua] of Object.entries({ ACQUIRE, RELEASE, RELEASE_KEY, WAKE_RELEASE, PASS_ON, SET_AND_FENCE, SET_AND_CLOCK_FENCE, DELETE_IF_EQUAL, EXTEND_MANY, GET_PEXPIRE, PEXPIRE_ONLY })) sha[name] = await client.script('LOAD', lua);

  /** Server µs per EVALSHA over CALLS calls queued by `add(pipeline, i)`, after `setup`. */
  const measure = async (setup, add, perUnit = 1, calls = CALLS) => {
    await client.flushall();
    await setup();
    await client.config('RESETSTAT');
    for (let i = 0; i < calls; i += BATCH) {
      const p = client.pipeline();
      for (let j = i; j < Math.min(calls, i + BATCH); j++) add(p, j);
      // A call that fails costs the server next to nothing: a figure measured on error replies
      // would be no figure at all.
      for (const [error] of await p.exec()) if (error) throw error;
    }
    const m = /cmdstat_evalsha:calls=(\d+),usec=(\d+)/.exec(await client.info('commandstats'));
    return (perUnit * Number(m[2])) / Number(m[1]);
  };
  const cases = {
    'grant: latchkey release.lua': () =>
      measure(
        () => client.set(k, token(0), 'PX', 100_000),
        (p, j) => {
          p.zadd(keys[2], j + 1, `inbox1:w${j + 1}`);
          p.hset(keys[3], `inbox1:w${j + 1}`, `${Date.now() + 100_000} 10000 ${token(j + 1)}`);
          p.evalsha(sha.RELEASE, 4, ...keys, token(j), 'p:');
        },
      ),
    'grant: ring pass-on': () =>
      measure(
        () => client.set(k, token(0), 'PX', 100_000),
        (p, j) => p.evalsha(sha.PASS_ON, 1, k, token(j), token(j + 1), 'p:inbox1'),
      ),
    'queue join: latchkey acquire.lua': () =>
      measure(
        () => client.set(k, 'holder', 'PX', 100_000),
        (p, j) => p.evalsha(sha.ACQUIRE, 4, ...keys, token(j), '10000', '', `inbox1:w${j % 64}`, '3000'),
      ),
    'lone pair: latchkey acquire.lua + release-key.lua': () =>
      measure(
        async () => {},
        (p, j) => {
          const lock = `{k${j}}`;
          p.evalsha(sha.ACQUIRE, 2, lock, `${lock}:fence`, token(j), '10000');
          p.evalsha(sha.RELEASE_KEY, 2, lock, `${lock}:queue`, token(j));
        },
        2,
      ),
    'free pair: latchkey acquire.lua + release.lua': () =>
      measure(
        async () => {},
        (p, j) => {
          const lock = `{k${j}}`;
          const lockKeysOf = [lock, `${lock}:fence`, `${lock}:queue`, `${lock}:alive`];
          p.evalsha(sha.ACQUIRE, 2, lock, `${lock}:fence`, token(j), '10000');
          p.evalsha(sha.RELEASE, 4, ...lockKeysOf, token(j), 'p:');
        },
        2,
      ),
    'Redlock node free pair: latchkey acquire.lua (floor) + wake-release.lua': () =>
      measure(
        // One lock taken and released again and again by one caller, as in bench/quorum.mjs: its
        // counter exists, and the floor offered is the fence the node issues (the last one + 1).
        () => client.set(`${k}:fence`, String(COUNTER_START), 'PX', FENCE_TTL),
        (p, j) => {
          const floor = String(COUNTER_START + j + 1);
          p.evalsha(sha.ACQUIRE, 2, k, `${k}:fence`, token(j), '10000', floor);
          p.evalsha(sha.WAKE_RELEASE, 3, k, `${k}:queue`, `${k}:alive`, token(j), 'p:');
        },
        2,
      ),
    ...Object.fromEntries(
      [
        ['renewal, per lease: latchkey extend-many.lua', 'EXTEND_MANY'],
        ['renewal, per lease: GET + PEXPIRE per lease', 'GET_PEXPIRE'],
        ['renewal, per lease: PEXPIRE alone, unchecked (floor)', 'PEXPIRE_ONLY'],
      ].map(([name, script]) => {
        const held = Array.from({ length: RENEWED }, (_, i) => `held{${i}}`);
        const tokens = held.map((_, i) => token(i));
        // extend-many.lua takes the ttl, the tokens' length and the tokens as one argument; the
        // two per-lease scripts take the ttl and a token per key.
        const args = script === 'EXTEND_MANY' ? ['10000', String(tokens[0].length), tokens.join('')] : ['10000', ...tokens];
        const setup = async () => {
          const p = client.pipeline();
          held.forEach((key, i) => p.set(key, token(i), 'PX', 100_000));
          await p.exec();
        };
        return [name, () => measure(setup, (p) => p.evalsha(sha[script], RENEWED, ...held, ...(script === 'PEXPIRE_ONLY' ? ['10000'] : args)), 1 / RENEWED, RENEWAL_CALLS)];
      }),
    ),
    ...Object.fromEntries(
      [
        ['lone pair: smallest fenced lock (INCR)', 'SET_AND_FENCE'],
        ['lone pair: smallest lock with a clock fence', 'SET_AND_CLOCK_FENCE'],
      ].map(([name, script]) => [
        name,
        () =>
          measure(
            async () => {},
            (p, j) => {
              const lock = `{k${j}}`;
              p.evalsha(sha[script], 2, lock, `${lock}:fence`, token(j), '10000');
              p.evalsha(sha.DELETE_IF_EQUAL, 1, lock, token(j));
            },
            2,
          ),
      ]),
    ),
  };
  const results = Object.fromEntries(Object.keys(cases).map((name) => [name, []]));
  for (let round = 0; round < ROUNDS; round++) for (const [name, run] of Object.entries(cases)) results[name].push(await run());
  console.log('| script | server µs per call (per pair for "lone pair" and "free pair", per lease for "renewal"): min | median |');
  console.log('| --- | --: | --: |');
  for (const [name, xs] of Object.entries(results)) {
    const s = [...xs].sort((a, b) => a - b);
    console.log(`| ${name} | ${s[0].toFixed(2)} | ${s[s.length >> 1].toFixed(2)} |`);
  }
} finally {
  sub.disconnect();
  client.disconnect();
  await server.stop();
}
