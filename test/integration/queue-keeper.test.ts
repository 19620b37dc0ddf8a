/**
 * The queue keeper (issue 22, waiters at scale): waiters queued for held locks make no attempt of
 * their own while they sleep; one keep-queued.lua call per tick keeps all their queue entries and
 * wakes exactly those that must look (the lock freed unannounced, their entry dropped). Counted with
 * MONITOR on a private redis-server.
 */
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocks, type Lease, type Locks } from '../../src/index.js';
import { inboxPrefix, lockKeys } from '../../src/keys.js';
import { keepQueuedCall } from '../../src/backend/redis-calls.js';
import { acquireScript, keepQueuedScript } from '../../src/lua/scripts.generated.js';
import { rawClient, uniquePrefix } from '../helpers/harness.js';
import { RedisServer } from '../helpers/redis-server.js';

const RECHECK = 200;

let server: RedisServer;
let monitor: Redis;
let raw: Redis;
/** The scripts the server ran, as `<name>/<number of keys>`, and ECHO markers. */
const seen: string[] = [];
/**
 * Each keep-queued.lua call, in the order the server ran them: when (MONITOR's timestamp, ms), its
 * entry ttl (ARGV[1]) and the waiters it carried (ARGV[2]).
 */
const keptCalls: { at: number; entryTtl: number; waiters: string[] }[] = [];
const names = new Map([
  [acquireScript.sha, 'acquire'],
  [keepQueuedScript.sha, 'keep'],
]);

beforeAll(async () => {
  server = await RedisServer.start();
  raw = rawClient(server);
  monitor = rawClient(server);
  const feed = await monitor.monitor();
  feed.on('monitor', (_time: string, args: string[]) => {
    const command = args[0]?.toLowerCase();
    if (command === 'echo') seen.push(`marker ${args[1]}`);
    if (command === 'evalsha') seen.push(`${names.get(args[1]!) ?? 'other'}/${args[2]}`);
    if (command === 'evalsha' && args[1] === keepQueuedScript.sha) {
      const keys = Number(args[2]);
      keptCalls.push({ at: Number(_time) * 1000, entryTtl: Number(args[3 + keys]), waiters: args[4 + keys]!.split(' ') });
    }
  });
});

afterAll(async () => {
  monitor.disconnect();
  raw.disconnect();
  await server.stop();
});

/** Resolves once MONITOR reported everything the server ran before now (an ECHO sent last marks it). */
async function caughtUp(): Promise<void> {
  const marker = uniquePrefix();
  await raw.call('ECHO', marker);
  await expect.poll(() => seen.includes(`marker ${marker}`), { timeout: 2000, interval: 1 }).toBe(true);
}

/** Two managers on one prefix: `holder` holds, `waiter` waits with a short recheck. */
function managers(): { prefix: string; holder: Locks; waiter: Locks; close(): Promise<void> } {
  const prefix = uniquePrefix();
  const [a, b] = [rawClient(server), rawClient(server)];
  const holder = createLocks({ redis: a, prefix, holder: false });
  const waiter = createLocks({ redis: b, prefix, holder: false, recheck: RECHECK });
  return {
    prefix,
    holder,
    waiter,
    async close() {
      await Promise.all([holder.close(), waiter.close()]);
      a.disconnect();
      b.disconnect();
    },
  };
}

/** Resolves once `member count` waiters are queued for the locks named (ZCARD of each queue). */
async function queued(prefix: string, names: readonly string[]): Promise<void> {
  await expect
    .poll(async () => {
      const counts = await Promise.all(names.map((name) => raw.zcard(lockKeys(prefix, name).queue)));
      return counts.every((n) => n === 1);
    }, { timeout: 5000, interval: 20 })
    .toBe(true);
}

describe('the queue keeper', () => {
  it('keeps 200 waiters on 200 held locks queued with one call per recheck period, and no attempt of their own, not even to take a grant', async () => {
    const m = managers();
    const names = Array.from({ length: 200 }, (_, i) => `held-${i}`);
    try {
      const leases = await Promise.all(names.map((name) => m.holder.acquire(name, { ttl: 30_000 })));
      // A TTL whose half is shorter than the window below: a grant then counts from the keeper's
      // last call (at most a recheck old), not from the waiter's last attempt (older than the
      // window). Half of it is still five rechecks: a machine that stalls the keeper for a few
      // hundred ms does not make a waiter attempt (ttl 1000 did, once in CI: 30 of 200).
      const waits = names.map((name) => m.waiter.acquire(name, { wait: 20_000, ttl: 2000 }));
      await queued(m.prefix, names);
      await caughtUp();
      seen.length = 0;
      const started = Date.now();
      // A window of time is what is measured here: five recheck periods, longer than ttl / 2.
      await new Promise((resolve) => setTimeout(resolve, 5 * RECHECK + RECHECK / 2));
      await caughtUp();
      const elapsed = Date.now() - started;
      const scripts = seen.filter((s) => !s.startsWith('marker'));
      expect(scripts.filter((s) => s.startsWith('acquire'))).toEqual([]);
      const keeps = scripts.filter((s) => s.startsWith('keep'));
      expect(keeps.length).toBeGreaterThanOrEqual(2);
      expect(keeps.length).toBeLessThanOrEqual(Math.ceil(elapsed / RECHECK) + 1);
      expect(keeps.every((s) => s === `keep/${3 * 200}`)).toBe(true);
      // Their entries were refreshed: each deadline lies past the last attempt's 3 × recheck.
      const time = await raw.time();
      const nowMs = Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000);
      const entries = await Promise.all(names.map((name) => raw.hgetall(lockKeys(m.prefix, name).alive)));
      for (const entry of entries) {
        const [value] = Object.values(entry);
        const deadline = Number(value!.split(' ')[0]);
        expect(deadline).toBeGreaterThan(nowMs + 3 * RECHECK - RECHECK - 50);
      }
      // Released, each lock goes to its waiter (the inbox's grant, as before), which takes it without an attempt.
      seen.length = 0;
      await Promise.all(leases.map((lease) => lease.release()));
      const won: Lease[] = await Promise.all(waits);
      expect(won).toHaveLength(200);
      await caughtUp();
      expect(seen.filter((s) => s.startsWith('acquire'))).toEqual([]);
      await Promise.all(won.map((lease) => lease.release()));
    } finally {
      await m.close();
    }
  });

  it('spreads its calls over the period: 1,100 waiters are kept in calls of at most 500, one every recheck / 3, each waiter once a period', async () => {
    const m = managers();
    const n = 1100;
    const names = Array.from({ length: n }, (_, i) => `spread-${i}`);
    try {
      const leases = await Promise.all(names.map((name) => m.holder.acquire(name, { ttl: 30_000 })));
      const waits = names.map((name) => m.waiter.acquire(name, { wait: 20_000 }));
      await queued(m.prefix, names);
      await caughtUp();
      seen.length = 0;
      keptCalls.length = 0;
      // Six calls: two periods' worth (three periods on a quiet machine; a tick while a call is
      // unanswered is skipped, so a loaded one takes longer).
      await expect.poll(() => seen.filter((s) => s.startsWith('keep')).length, { timeout: 10_000, interval: 10 }).toBeGreaterThanOrEqual(6);
      await caughtUp();
      const keeps = seen.filter((s) => s.startsWith('keep'));
      // No call carries more than 500 waiters (3 keys each).
      for (const call of keeps) expect(Number(call.split('/')[1])).toBeLessThanOrEqual(3 * 500);
      // One call at a time, a third of a period apart (the timer enforces it; half of it allows for a late send).
      const calls = keptCalls.slice();
      const gaps = calls.slice(1).map((c, i) => c.at - calls[i]!.at);
      expect(Math.min(...gaps)).toBeGreaterThanOrEqual(RECHECK / 3 / 2);
      // Each waiter once a period: any three calls in a row carry every waiter (those kept longest
      // first, however late a loaded machine sends them), so no entry was refreshed longer ago than
      // the third-last call.
      for (let i = 0; i + 3 <= calls.length; i++) {
        const carried = calls.slice(i, i + 3).flatMap((c) => c.waiters);
        expect(new Set(carried).size).toBe(n);
      }
      const entries = await Promise.all(names.map((name) => raw.hgetall(lockKeys(m.prefix, name).alive)));
      const thirdLast = calls[calls.length - 3]!;
      const since = thirdLast.at + thirdLast.entryTtl;
      for (const entry of entries) {
        const deadline = Number(Object.values(entry)[0]!.split(' ')[0]);
        // MONITOR stamps a call as it arrives, in µs; the script reads the clock a moment later, in ms.
        expect(deadline).toBeGreaterThanOrEqual(Math.floor(since) - 1);
      }
      await Promise.all(leases.map((lease) => lease.release()));
      await Promise.all((await Promise.all(waits)).map((lease) => lease.release()));
    } finally {
      await m.close();
    }
  });

  it('gives a waiter whose release nobody announced (a raw DEL) the lock within about one recheck period', async () => {
    const m = managers();
    try {
      await m.holder.acquire('lost', { ttl: 30_000 });
      const waiting = m.waiter.acquire('lost', { wait: 10_000 });
      await queued(m.prefix, ['lost']);
      const deleted = Date.now();
      await raw.del(lockKeys(m.prefix, 'lost').lock);
      const lease = await waiting;
      expect(Date.now() - deleted).toBeLessThan(RECHECK + 150);
      await lease.release();
    } finally {
      await m.close();
    }
  });

  it('has a waiter whose queue entry was dropped attempt, and so queue again, at its next tick; the release then grants it the lock', async () => {
    const m = managers();
    const keys = lockKeys(m.prefix, 'dropped');
    try {
      const held = await m.holder.acquire('dropped', { ttl: 30_000 });
      const waiting = m.waiter.acquire('dropped', { wait: 10_000 });
      await queued(m.prefix, ['dropped']);
      const [member] = await raw.zrange(keys.queue, '0', '-1');
      await caughtUp();
      seen.length = 0;
      await raw.zrem(keys.queue, member!);
      await raw.hdel(keys.alive, member!);
      const dropped = Date.now();
      await expect.poll(() => raw.zscore(keys.queue, member!), { timeout: 2000, interval: 5 }).not.toBeNull();
      expect(Date.now() - dropped).toBeLessThan(RECHECK + 150);
      await caughtUp();
      expect(seen.filter((s) => s === 'acquire/4')).toHaveLength(1); // its one attempt
      await held.release();
      const lease = await waiting;
      await lease.release();
    } finally {
      await m.close();
    }
  });

  it('has a waiter whose grant message was lost (the lock holds its token, its entry is gone) take its lock within about one recheck period', async () => {
    const m = managers();
    const keys = lockKeys(m.prefix, 'granted');
    try {
      await m.holder.acquire('granted', { ttl: 30_000 });
      const waiting = m.waiter.acquire('granted', { wait: 10_000 });
      await queued(m.prefix, ['granted']);
      // What release.lua's grant writes, without its PUBLISH.
      const [member] = await raw.zrange(keys.queue, '0', '-1');
      const [, ttl, token] = (await raw.hget(keys.alive, member!))!.split(' ');
      const granted = Date.now();
      await raw.multi().zrem(keys.queue, member!).hdel(keys.alive, member!).set(keys.lock, token!, 'PX', Number(ttl)).exec();
      const lease = await waiting;
      expect(Date.now() - granted).toBeLessThan(RECHECK + 150);
      expect(await raw.get(keys.lock)).toBe(token);
      await lease.release();
    } finally {
      await m.close();
    }
  });

  it('tells a waiter whose entry is gone in its inbox, after the grant that took it out: keep-queued.lua publishes a wake-up when a listener hears it, and nothing otherwise', async () => {
    const prefix = uniquePrefix();
    const heard: string[] = [];
    const listener = rawClient(server);
    try {
      listener.on('message', (_channel: string, message: string) => heard.push(message));
      await listener.subscribe(`${inboxPrefix(prefix)}m1`);
      const time = await raw.time();
      const nowMs = Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000);
      const token = 'ab'.repeat(20);
      const waiter = (name: string, member: string) => ({ keys: lockKeys(prefix, name), member });
      const granted = waiter('granted', 'm1:1');
      const held = waiter('held', 'm1:2');
      const unheard = waiter('unheard', 'nobody:3');
      for (const w of [granted, held, unheard]) {
        await raw.set(w.keys.lock, 'other', 'PX', 30_000);
        await raw.zadd(w.keys.queue, 1, w.member);
        await raw.hset(w.keys.alive, w.member, `${nowMs + 10_000} 5000 ${token}`);
      }
      // What release.lua's grant does to `granted`, with its message.
      await raw
        .multi()
        .zrem(granted.keys.queue, granted.member)
        .hdel(granted.keys.alive, granted.member)
        .set(granted.keys.lock, token, 'PX', 5000)
        .publish(`${inboxPrefix(prefix)}m1`, `${granted.member} 77`)
        .exec();
      await raw.zrem(unheard.keys.queue, unheard.member);
      const call = keepQueuedCall([granted, held, unheard], 600, inboxPrefix(prefix));
      const reply = (await raw.eval(keepQueuedScript.source, call.keys.length, ...call.keys, ...call.args)) as number[];
      expect(reply[0]).toBe(-4); // gone, told
      expect(reply[1]).toBeGreaterThan(29_000); // held: its PTTL
      expect(reply[2]).toBe(-3); // gone, nobody heard
      await raw.publish(`${inboxPrefix(prefix)}m1`, 'end');
      await expect.poll(() => heard.at(-1), { timeout: 2000, interval: 5 }).toBe('end');
      // The grant first, then the wake-up: the inbox hands the waiter its grant before it wakes.
      expect(heard).toEqual([`${granted.member} 77`, `${granted.member} 0`, 'end']);
      // Without the inbox prefix (Redis Cluster), nobody is told.
      const bare = keepQueuedCall([granted], 600);
      expect(await raw.eval(keepQueuedScript.source, bare.keys.length, ...bare.keys, ...bare.args)).toEqual([-3]);
    } finally {
      listener.disconnect();
    }
  });

  it('wakes a waiter at its holder TTL when the holder does not renew (the TTL the keeper saw)', async () => {
    const m = managers();
    try {
      await m.holder.acquire('expires', { ttl: 3 * RECHECK, renew: false });
      const started = Date.now();
      const lease = await m.waiter.acquire('expires', { wait: 10_000 });
      expect(Date.now() - started).toBeLessThan(3 * RECHECK + 100);
      await lease.release();
    } finally {
      await m.close();
    }
  });
});
