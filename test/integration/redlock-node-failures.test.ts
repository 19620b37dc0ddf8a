/**
 * Redlock over three independent redis-server processes whose nodes die, freeze and come back:
 * fences that stay increasing across node failures, per-node timeouts, and late replies.
 */
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { QuorumError } from '../../src/index.js';
import { lockKeys } from '../../src/keys.js';
import { wakeReleaseScript } from '../../src/lua/scripts.generated.js';
import { managerOver, uniquePrefix } from '../helpers/fixtures.js';
import { eventually, useRedlockNodes } from '../helpers/redlock-nodes.js';

const { servers, raws, cleanup, redlock } = useRedlockNodes(3);

describe('Redlock', () => {
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
});
