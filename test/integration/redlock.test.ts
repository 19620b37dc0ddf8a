/**
 * Redlock over three independent redis-server processes: quorum outcomes as data, nodes that die,
 * freeze and come back, fences that stay increasing across node failures, and late replies.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createLocks,
  InvalidOptionError,
  LeaseLostError,
  LockTimeoutError,
  QuorumError,
  UnsupportedError,
  type Locks,
} from '../../src/index.js';
import { lockKeys } from '../../src/keys.js';
import { wakeReleaseScript } from '../../src/lua/scripts.generated.js';
import { rawClient, uniquePrefix, managerOver } from '../helpers/harness.js';
import { RedisServer } from '../helpers/redis-server.js';
import { aborted } from '../contract/lock-contract.js';

const servers: RedisServer[] = [];
const raws: Redis[] = [];
const cleanup: Array<() => Promise<unknown>> = [];

beforeAll(async () => {
  servers.push(...(await Promise.all([RedisServer.start(), RedisServer.start(), RedisServer.start()])));
  raws.push(...servers.map(rawClient));
  for (const raw of raws) raw.on('error', () => {});
});
afterAll(async () => {
  for (const step of cleanup.reverse()) await step();
  for (const raw of raws) raw.disconnect();
  await Promise.all(servers.map((s) => s.stop()));
});

/** A Redlock manager over `on` (default: the three servers), with its own clients (no retries, so a dead node fails fast). */
function redlock(settings: { prefix: string; nodeTimeout?: number; recheck?: number }, on: readonly RedisServer[] = servers): Locks {
  const clients = on.map((s) => new Redis(s.port, '127.0.0.1', { maxRetriesPerRequest: 0, retryStrategy: () => 50 }));
  return managerOver(cleanup, clients, { ...settings, redlock: clients });
}

/** Keeps asking until `check` holds, for at most `ms` (for effects of late replies, which no event announces). */
async function eventually(check: () => Promise<boolean>, ms = 3000): Promise<boolean> {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, 10));
  }
  return check();
}

const fenceOn = async (raw: Redis, prefix: string, name: string): Promise<number> =>
  Number((await raw.get(lockKeys(prefix, name).fence)) ?? 0);

describe('Redlock', () => {
  it('takes a lease on every node and releases it from every node', async () => {
    const prefix = uniquePrefix();
    const locks = redlock({ prefix });
    expect(locks.backend).toBe('redlock (3 nodes)');
    const lease = await locks.acquire('all', { ttl: 5000 });
    const key = lockKeys(prefix, 'all').lock;
    // Handed out once a majority voted for it (the third node's reply may still be on its way).
    const holders = async (): Promise<number> => (await Promise.all(raws.map((r) => r.get(key)))).filter((t) => t === lease.token).length;
    expect(await holders()).toBeGreaterThanOrEqual(2);
    expect(await eventually(async () => (await holders()) === 3)).toBe(true);
    // The lease's fence is the highest of the voters', and a majority of counters is at least that.
    const fences = await Promise.all(raws.map((r) => fenceOn(r, prefix, 'all')));
    expect(fences.filter((f) => f >= lease.fence).length).toBeGreaterThanOrEqual(2);
    await lease.release();
    expect(await eventually(async () => (await Promise.all(raws.map((r) => r.exists(key)))).every((n) => n === 0))).toBe(true);
  });

  it('in the steady state an acquire is one script per node: the voters issue the same fence and none needs raising', async () => {
    const prefix = uniquePrefix();
    // A node timeout far above a loaded machine's delays: a node marked hung would add retries.
    const locks = redlock({ prefix, nodeTimeout: 2000 });
    // The first acquire finds no counters; from then on the counters agree.
    await (await locks.acquire('steady', { ttl: 5000 })).release();
    const keyOf = lockKeys(prefix, 'steady');
    // A lease is handed out and released on a majority: the third node's acquire and release may
    // still be on their way. Both ran on a node once its counter is at `fence` (the acquire wrote
    // it) and the lock key is gone (the release, sent after it on the same connection, ran too).
    // A lock key that is gone alone does not say it: the acquire may not have run yet.
    const ranEverywhere = (fence: number): Promise<boolean> =>
      eventually(async () =>
        (
          await Promise.all(raws.map(async (r) => (await fenceOn(r, prefix, 'steady')) >= fence && (await r.exists(keyOf.lock)) === 0))
        ).every(Boolean),
      );
    const scriptCalls = async (): Promise<number> => {
      let sum = 0;
      for (const raw of raws) {
        const stats = await raw.info('commandstats');
        for (const m of stats.matchAll(/cmdstat_(?:evalsha|eval):calls=(\d+)/g)) sum += Number(m[1]);
      }
      return sum;
    };
    // Wait for the stragglers' copies of the first acquire and release before counting.
    expect(await ranEverywhere(1)).toBe(true);
    const before = await scriptCalls();
    const rounds = 5;
    let last = 0;
    for (let i = 0; i < rounds; i++) {
      const lease = await locks.acquire('steady', { ttl: 5000 });
      expect(lease.fence).toBeGreaterThan(last);
      last = lease.fence;
      const fences = await Promise.all(raws.map((r) => fenceOn(r, prefix, 'steady')));
      expect(fences.filter((f) => f === lease.fence).length).toBeGreaterThanOrEqual(2);
      await lease.release();
      expect(await ranEverywhere(lease.fence)).toBe(true);
    }
    // An acquire and a release per node per round, and no raise-fence script. (This test's own
    // probes are EXISTS, GET and INFO, not scripts.)
    expect((await scriptCalls()) - before).toBe(rounds * 2 * raws.length);
  });

  it('wins with a majority while a minority is held by another owner, and not without one', async () => {
    const prefix = uniquePrefix();
    const locks = redlock({ prefix });
    const key = lockKeys(prefix, 'minority').lock;
    await raws[0]!.set(key, 'someone-else', 'PX', 60_000);
    const lease = await locks.acquire('minority', { ttl: 5000 });
    await lease.release();
    expect(await raws[0]!.get(key)).toBe('someone-else'); // never touches another owner's key

    await raws[1]!.set(key, 'someone-else', 'PX', 60_000);
    expect(await locks.tryAcquire('minority')).toBeNull();
    const timedOut = await locks.acquire('minority', { wait: 50 }).catch((e: unknown) => e);
    expect(timedOut).toBeInstanceOf(LockTimeoutError);
    const outcome = (timedOut as LockTimeoutError).outcome!;
    expect(outcome).toMatchObject({ operation: 'acquire', quorum: 2, for: 1, against: 2, errors: 0 });
    expect(outcome.votes.map((v) => v.vote)).toEqual(['against', 'against', 'for']);
    expect((timedOut as Error).message).toMatch(/1 of 3 nodes voted for, 2 needed/);
    // The node it did win was given back (the release is sent, not waited for).
    expect(await eventually(async () => (await raws[2]!.exists(key)) === 0)).toBe(true);
  });

  it('fences stay strictly increasing while nodes die, lose their data and come back', async () => {
    const prefix = uniquePrefix();
    const locks = redlock({ prefix, nodeTimeout: 200 });
    const name = 'fences';
    const fenceKey = lockKeys(prefix, name).fence;
    const seen: number[] = [];
    const take = async (): Promise<void> => {
      const lease = await locks.acquire(name, { ttl: 5000, wait: 5000 });
      seen.push(lease.fence);
      await lease.release();
    };
    await take();
    // Nodes 0 and 1 count far ahead of node 2 (nodes whose clocks were ahead once). Every
    // majority has one of them, so the next lease gets a fence from an ahead counter, and the
    // voters below it are raised to it.
    const ahead = seen[0]! + 1e12;
    await raws[0]!.set(fenceKey, String(ahead + 5), 'PX', 600_000);
    await raws[1]!.set(fenceKey, String(ahead), 'PX', 600_000);
    await take();
    expect(seen[1]).toBeGreaterThan(ahead);
    // Node 0 dies: the majority {1, 2} must still issue higher fences, though their own counters never saw node 0's.
    await servers[0]!.kill();
    await take();
    // Node 0 comes back empty (no persistence), node 1 dies: the majority {0, 2} shares node 2 with the last one.
    await servers[0]!.restart();
    await servers[1]!.kill();
    await take();
    await servers[1]!.restart();
    await take();
    for (let i = 1; i < seen.length; i++) expect(seen[i]).toBeGreaterThan(seen[i - 1]!);
  });

  it('works with one node down, and throws a QuorumError that names each failing node with two down', async () => {
    const prefix = uniquePrefix();
    const locks = redlock({ prefix, nodeTimeout: 200 });
    await servers[2]!.kill();
    try {
      const lease = await locks.acquire('down', { ttl: 5000 });
      await lease.release();
      await servers[1]!.kill();
      const started = performance.now();
      const error = await locks.acquire('down', { ttl: 5000, wait: 300 }).catch((e: unknown) => e);
      expect(performance.now() - started).toBeGreaterThanOrEqual(300); // retried until its deadline
      expect(error).toBeInstanceOf(QuorumError);
      const q = error as QuorumError;
      expect(q.code).toBe('QUORUM');
      expect(q.outcome).toMatchObject({ for: 1, errors: 2, quorum: 2 });
      expect(q.outcome.votes.map((v) => v.vote)).toEqual(['for', 'error', 'error']);
      expect(q.message).toMatch(new RegExp(`node 1 \\(127.0.0.1:${servers[1]!.port}\\): error`));
      expect(q.cause).toBeInstanceOf(Error);
      // tryAcquire cannot tell "held" from "unreachable" either: it throws too.
      await expect(locks.tryAcquire('down')).rejects.toBeInstanceOf(QuorumError);
      // The one node it won was given back.
      expect(await eventually(async () => (await raws[0]!.exists(lockKeys(prefix, 'down').lock)) === 0)).toBe(true);
    } finally {
      await servers[1]!.restart();
      await servers[2]!.restart();
    }
  });

  it('does not wait for a frozen node longer than the per-node timeout, and cleans up after its late reply', async () => {
    const prefix = uniquePrefix();
    const locks = redlock({ prefix, nodeTimeout: 50 });
    const key = lockKeys(prefix, 'frozen').lock;
    // Node 2 knows the release script but not the acquire script: when it wakes, the queued
    // release runs first and the acquire is re-sent as EVAL after it (NOSCRIPT), so it lands late.
    await raws[2]!.script('FLUSH');
    await raws[2]!.script('LOAD', wakeReleaseScript.source);
    servers[2]!.pause();
    let resumed = false;
    try {
      const started = performance.now();
      const lease = await locks.acquire('frozen', { ttl: 5000 });
      expect(performance.now() - started).toBeLessThan(1000);
      await lease.release();
      // Two frozen nodes: no quorum. Their acquires go through when they wake, and are given back.
      servers[1]!.pause();
      const error = await locks.acquire('frozen', { ttl: 5000, wait: 0 }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(QuorumError);
      expect((error as QuorumError).outcome.votes.map((v) => v.vote)).toEqual(['for', 'error', 'error']);
      expect((error as QuorumError).message).toMatch(/no reply within 50 ms/);
      servers[1]!.resume();
      servers[2]!.resume();
      resumed = true;
      const gone = async (): Promise<boolean> => (await Promise.all(raws.map((r) => r.exists(key)))).every((n) => n === 0);
      expect(await eventually(gone)).toBe(true);
    } finally {
      if (!resumed) {
        servers[1]!.resume();
        servers[2]!.resume();
      }
    }
  });

  it('ends each fan-out at its own per-node timeout: a shorter one started later is not held to the longer one before it', async () => {
    const prefix = uniquePrefix();
    // Per-node timeout: a tenth of the TTL, between 10 and 100 ms. No acquire before the two
    // below (its deadline would wake the manager before theirs): the connections are up by PING.
    const clients = servers.map((s) => new Redis(s.port, '127.0.0.1', { maxRetriesPerRequest: 0 }));
    await Promise.all(clients.map((c) => c.ping()));
    const locks = managerOver(cleanup, clients, { prefix, redlock: clients });
    servers[1]!.pause();
    servers[2]!.pause();
    try {
      const settled: string[] = [];
      const long = locks.acquire('long', { ttl: 1000, wait: 0 }).catch((e: unknown) => (settled.push('long'), e));
      const short = locks.acquire('short', { ttl: 200, wait: 0 }).catch((e: unknown) => (settled.push('short'), e));
      const [longError, shortError] = await Promise.all([long, short]);
      expect(settled).toEqual(['short', 'long']);
      expect((shortError as QuorumError).message).toMatch(/no reply within 20 ms/);
      expect((longError as QuorumError).message).toMatch(/no reply within 100 ms|not answering/);
    } finally {
      servers[1]!.resume();
      servers[2]!.resume();
    }
  });

  it('gives back an acquire that lands after its release (a frozen node whose NOSCRIPT fallback re-sends it late)', async () => {
    const prefix = uniquePrefix();
    const locks = redlock({ prefix, nodeTimeout: 50 });
    await (await locks.acquire('warm')).release(); // connections up
    const key = lockKeys(prefix, 'late').lock;
    // Node 2 knows the release script but not the acquire script: when it wakes, the queued
    // release runs first and the acquire is re-sent as EVAL after it, so it lands after the release.
    await raws[2]!.script('FLUSH');
    await raws[2]!.script('LOAD', wakeReleaseScript.source);
    servers[2]!.pause();
    try {
      const lease = await locks.acquire('late', { ttl: 5000 }); // won on nodes 0 and 1
      await lease.release();
    } finally {
      servers[2]!.resume();
    }
    expect(await eventually(async () => (await raws[2]!.exists(key)) === 0)).toBe(true);
  });

  it('a release retried after a QuorumError still counts the nodes that released it the first time', async () => {
    const prefix = uniquePrefix();
    const locks = redlock({ prefix, nodeTimeout: 50 });
    const lease = await locks.acquire('retry', { ttl: 5000 });
    const key = lockKeys(prefix, 'retry').lock;
    expect(await eventually(async () => (await raws[2]!.exists(key)) === 1)).toBe(true);
    await raws[2]!.del(key); // held on nodes 0 and 1 only
    servers[1]!.pause();
    try {
      // Node 0 releases, node 1 does not answer, node 2 has nothing: undecided.
      await expect(lease.release()).rejects.toBeInstanceOf(QuorumError);
      // Node 0 now finds it gone, but it released it: still undecided, not "lost".
      await expect(lease.release()).rejects.toBeInstanceOf(QuorumError);
    } finally {
      servers[1]!.resume();
    }
  });

  it('extend needs a majority: a lease deleted on two nodes is lost, and the third copy is given back', async () => {
    const prefix = uniquePrefix();
    const locks = redlock({ prefix });
    const lease = await locks.acquire('extend', { ttl: 5000 });
    const key = lockKeys(prefix, 'extend').lock;
    // Handed out on a majority; wait for the third node's copy, so that deleting below is what decides.
    const copies = async (): Promise<number> => (await Promise.all(raws.map((r) => r.get(key)))).filter((t) => t === lease.token).length;
    expect(await eventually(async () => (await copies()) === 3)).toBe(true);
    await raws[0]!.del(key);
    await lease.extend(5000); // two of three still hold it
    await raws[1]!.del(key);
    await expect(lease.extend(5000)).rejects.toBeInstanceOf(LeaseLostError);
    expect(await aborted(lease.signal)).toBeInstanceOf(LeaseLostError);
    expect(await eventually(async () => (await raws[2]!.exists(key)) === 0)).toBe(true);
  });

  it('a waiter wakes when the release reaches the nodes, not at its recheck or the TTL', async () => {
    const prefix = uniquePrefix();
    const [a, b] = [redlock({ prefix }), redlock({ prefix, recheck: 60_000 })];
    const holder = await a.acquire('wake', { ttl: 60_000 });
    const waiting = b.acquire('wake', { wait: 10_000 });
    await new Promise((r) => setTimeout(r, 50)); // let it queue on the nodes
    const released = performance.now();
    await holder.release();
    const lease = await waiting;
    expect(performance.now() - released).toBeLessThan(1000);
    expect(lease.fence).toBeGreaterThan(holder.fence);
    await lease.release();
  });

  it('refuses fenced writes (a fenced resource lives on one Redis)', async () => {
    const locks = redlock({ prefix: uniquePrefix() });
    await expect(locks.fencedWrite('resource', 'x', 1)).rejects.toBeInstanceOf(UnsupportedError);
  });
});

describe('Redlock options', () => {
  it('refuses an empty node list, a node given twice, and nodeTimeout without redlock', () => {
    expect(() => createLocks({ redlock: [] })).toThrow(InvalidOptionError);
    const client = new Redis({ lazyConnect: true });
    try {
      expect(() => createLocks({ redlock: [client, client] })).toThrow(/would vote twice/);
      expect(() => createLocks({ redlock: ['redis://127.0.0.1:1', 'redis://127.0.0.1:1/'] })).toThrow(/would vote twice/);
      expect(() => createLocks({ redlock: ['http://x'] })).toThrow(/redlock\[0\]/);
      expect(() => createLocks({ nodeTimeout: 50 })).toThrow(/only with "redlock"/);
      expect(() => createLocks({ redlock: [client], redis: client })).toThrow(/exactly one of "redis", "url", "redlock" or "memory"/);
    } finally {
      client.disconnect();
    }
  });
});

describe('Redlock over five nodes, some killed or hung', () => {
  const five: RedisServer[] = [];
  const fiveRaw: Redis[] = [];
  beforeAll(async () => {
    five.push(...(await Promise.all(Array.from({ length: 5 }, () => RedisServer.start()))));
    fiveRaw.push(...five.map(rawClient));
    for (const raw of fiveRaw) raw.on('error', () => {});
  });
  afterAll(async () => {
    for (const raw of fiveRaw) raw.disconnect();
    await Promise.all(five.map((s) => s.stop()));
  });

  const redlock5 = (settings: { prefix: string; nodeTimeout: number }): Locks => redlock(settings, five);

  const noKeyLeft = async (prefix: string, name: string): Promise<boolean> =>
    (await Promise.all(fiveRaw.map((r) => r.exists(lockKeys(prefix, name).lock)))).every((n) => n === 0);

  it('keeps working with 2 of 5 killed, fails cleanly with 3, recovers when they return, fences increasing throughout', async () => {
    const prefix = uniquePrefix();
    const locks = redlock5({ prefix, nodeTimeout: 200 });
    const fences: number[] = [];
    const take = async (wait = 5000): Promise<void> => {
      const lease = await locks.acquire('k', { ttl: 5000, wait });
      fences.push(lease.fence);
      await lease.release();
    };
    await take();
    await Promise.all([five[3]!.kill(), five[4]!.kill()]);
    await take();
    await five[2]!.kill();
    const error = await locks.acquire('k', { ttl: 5000, wait: 300 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(QuorumError);
    expect((error as QuorumError).outcome).toMatchObject({ for: 2, errors: 3, quorum: 3 });
    // They come back empty (no persistence): fences still grow, and the lock works again.
    await Promise.all([five[2]!.restart(), five[3]!.restart(), five[4]!.restart()]);
    await take();
    await Promise.all([five[0]!.kill(), five[1]!.kill()]);
    await take();
    await Promise.all([five[0]!.restart(), five[1]!.restart()]);
    await take();
    for (let i = 1; i < fences.length; i++) expect(fences[i]).toBeGreaterThan(fences[i - 1]!);
    expect(await eventually(() => noKeyLeft(prefix, 'k'))).toBe(true);
  });

  it('with 2 of 5 hung, waits for them once, not on every call, and leaves no key behind when they resume', async () => {
    const prefix = uniquePrefix();
    const nodeTimeout = 200;
    const locks = redlock5({ prefix, nodeTimeout });
    await (await locks.acquire('warm', { ttl: 5000 })).release(); // connections up
    five[3]!.pause();
    five[4]!.pause();
    let resumed = false;
    try {
      const first = await locks.acquire('hung', { ttl: 5000 }); // waits for the hung nodes once
      await first.release();
      // If every call waited for the hung nodes, 20 acquire+release pairs would take at least 20 × 2 × 200 ms.
      const started = performance.now();
      for (let i = 0; i < 20; i++) await (await locks.acquire('hung', { ttl: 5000 })).release();
      expect(performance.now() - started).toBeLessThan(20 * nodeTimeout);
      five[3]!.resume();
      five[4]!.resume();
      resumed = true;
      // The queued commands run when they wake: every acquire they missed is followed by its release.
      const end = performance.now() + 3000;
      while (!(await noKeyLeft(prefix, 'hung')) && performance.now() < end) await new Promise((r) => setTimeout(r, 20));
      expect(await noKeyLeft(prefix, 'hung')).toBe(true);
    } finally {
      if (!resumed) {
        five[3]!.resume();
        five[4]!.resume();
      }
    }
  });

  it('with 3 of 5 hung, rejects within its wait with a QuorumError naming them, and leaves no key behind when they resume', async () => {
    const prefix = uniquePrefix();
    const locks = redlock5({ prefix, nodeTimeout: 100 });
    await (await locks.acquire('warm', { ttl: 5000 })).release();
    for (const i of [0, 2, 4]) five[i]!.pause();
    let resumed = false;
    try {
      const started = performance.now();
      const error = await locks.acquire('majority', { ttl: 2000, wait: 1000 }).catch((e: unknown) => e);
      expect(performance.now() - started).toBeLessThan(1000 + 500); // its wait, plus the last attempt's node timeout
      expect(error).toBeInstanceOf(QuorumError);
      const votes = (error as QuorumError).outcome.votes;
      expect(votes.map((v) => v.vote)).toEqual(['error', 'for', 'error', 'for', 'error']);
      for (const i of [0, 2, 4]) expect((error as Error).message).toContain(`node ${i} (127.0.0.1:${five[i]!.port}): error`);
      for (const i of [0, 2, 4]) five[i]!.resume();
      resumed = true;
      const end = performance.now() + 3000;
      while (!(await noKeyLeft(prefix, 'majority')) && performance.now() < end) await new Promise((r) => setTimeout(r, 20));
      expect(await noKeyLeft(prefix, 'majority')).toBe(true);
    } finally {
      if (!resumed) for (const i of [0, 2, 4]) five[i]!.resume();
    }
  });
});
