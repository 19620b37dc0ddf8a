// How long Redis spends running each script call while a bench runs (bench/ring.mjs's
// RING_SERVER_TIMES=1): the slow log set to record every command, read over a window, its EVALSHA
// entries grouped by script. `INFO commandstats` gives one mean for every script call together;
// this tells the calls apart (a release that grants the lock is on the hand-off's path, an acquire
// that joins the queue mostly is not), and gives their median. The slow log's duration is the
// command's execution alone (not reading it or writing the reply), the scripts' inner commands
// included.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { FENCED_ACQUIRE, FENCED_RELEASE, PASS_ON, QUEUE_ACQUIRE, QUEUE_RELEASE } from './ring.mjs';
import { percentile, sorted } from './stats.mjs';

const sha1 = (text) => createHash('sha1').update(text).digest('hex');

/** SHA-1 → name: latchkey's scripts (src/lua/*.lua, loaded as written) and the ring's. */
function scriptNames() {
  const dir = new URL('../../src/lua/', import.meta.url);
  const names = new Map([
    [sha1(PASS_ON), 'pass-on'],
    [sha1(QUEUE_ACQUIRE), 'queue acquire'],
    [sha1(QUEUE_RELEASE), 'queue release'],
    [sha1(FENCED_ACQUIRE), 'fenced acquire'],
    [sha1(FENCED_RELEASE), 'fenced release'],
  ]);
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.lua'))) names.set(sha1(readFileSync(new URL(file, dir), 'utf8')), file);
  return names;
}

/**
 * Entries the slow log keeps. It logs the commands a script runs too (one entry each), so a
 * window of 5 s at 800 acquisitions a second and 19 commands each needs about 76,000 entries:
 * room for three times that (some 250 bytes each, on a private server).
 */
const KEPT = 250_000;

/**
 * Has the server behind the ioredis `client` log every command; `begin()` marks a window's start,
 * `end()` reads the calls since: { script name: { n, p50, p90 } } (µs), `restore()` puts the
 * slow log's settings back.
 */
export async function scriptTimes(client) {
  const names = scriptNames();
  const before = await client.config('GET', 'slowlog-*');
  await client.config('SET', 'slowlog-log-slower-than', '0', 'slowlog-max-len', String(KEPT));
  return {
    begin: async () => Number((await client.slowlog('GET', 1))[0]?.[0] ?? -1),
    async end(fromId) {
      const entries = await client.slowlog('GET', KEPT);
      const byScript = {};
      for (const [id, , micros, args] of entries) {
        if (id <= fromId || String(args[0]).toLowerCase() !== 'evalsha') continue;
        const name = names.get(String(args[1])) ?? String(args[1]).slice(0, 8);
        (byScript[name] ??= []).push(Number(micros));
      }
      const out = {};
      for (const [name, times] of Object.entries(byScript)) {
        const asc = sorted(times);
        out[name] = { n: asc.length, p50: percentile(asc, 50), p90: percentile(asc, 90) };
      }
      return out;
    },
    // (CONFIG GET's reply: a flat array over RESP2, a map, which ioredis makes an object, over RESP3.)
    restore: () => client.config('SET', ...(Array.isArray(before) ? before : Object.entries(before).flat())),
  };
}
