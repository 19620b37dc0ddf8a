/**
 * The short tier, server faults: a failover to a replica that had not seen the lock (with and
 * without replica acknowledgement), lock keys evicted under maxmemory, CLIENT PAUSE and DEBUG
 * SLEEP. Worker processes on the built package, the checkers over the history (check.ts).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { lockKeys } from '../../src/keys.js';
import { endTest, eventOf, summarize } from './check.js';
import { grants } from './checkers.js';
import { FaultRig } from './harness.js';

let rig: FaultRig | undefined;

afterEach((ctx) => endTest(rig, ctx).then(() => (rig = undefined)));

const of = eventOf;

describe('fault suite, failover to a replica that had not seen the lock', () => {
  /**
   * One timeline for both: the replication link is cut, `a` asks for the lock from the primary,
   * then the replica is promoted and the clients follow it (the old primary dies), and `b` asks.
   */
  async function failoverRun(replication: { replicas: number; timeout: number } | undefined): Promise<FaultRig> {
    rig = await FaultRig.start({ replica: true });
    rig.cutReplica();
    // a (when it gets the lock) holds until b is done (3.5 s at most, inside its TTL): the failover
    // and b's start, however slow the machine, fall inside a's window.
    await rig.spawnWorker('a', { ttl: 4_000, wait: 1_000, hold: 3_500, holdUntilTold: true, rounds: 1, ...(replication ? { replication } : {}) });
    const outcome = await rig.history.waitFor((e) => e.p === 'a' && (e.ev === 'holding' || e.ev === 'failed'), 10_000, 'a to hold or fail');
    await rig.failover();
    // b is a client of the new primary, which has no replica left: no acknowledgement to ask for.
    await rig.spawnWorker('b', { ttl: 4_000, wait: 8_000, hold: 20, rounds: 1 });
    await rig.history.waitFor(of('b', 'done'), 15_000, 'b to finish');
    await rig.endHold('a');
    await rig.history.waitFor(of('a', 'done'), 15_000, 'a to finish');
    expect(outcome.ev).toBe(replication ? 'failed' : 'holding');
    return rig;
  }

  it('WITHOUT acknowledgement: the checker sees the overlap, and the fenced resource refuses the stale write', async () => {
    const r = await failoverRun(undefined);
    const s = summarize(r);
    expect(s.faults).toMatchObject({ 'cut-replica': 1, failover: 1 });
    expect(s.acquisitions).toBe(2);
    expect(s.overlaps).toHaveLength(1);
    expect([s.overlaps[0]!.first.p, s.overlaps[0]!.second.p]).toEqual(['a', 'b']);
    // The new primary's fence counts from its clock (TIME in µs): still above a's.
    expect(s.fenceOrder).toBe(0);
    expect(s.writes.refusedWrites.map((w) => w.p)).toEqual(['a']);
    expect(s.writes.staleAccepted).toEqual([]);
    // a's release finds b's token and leaves it alone.
    expect(r.history.events.find(of('a', 'release-failed'))?.code).toBe('LEASE_LOST');
    expect(s.staleOperations).toEqual([]);
    expect(s.unsettled).toEqual([]);
  });

  it('WITH acknowledgement (replicas: 1, shortfall fail): the lease the replica missed is never handed out, no overlap', async () => {
    const r = await failoverRun({ replicas: 1, timeout: 300 });
    const s = summarize(r);
    const failed = r.history.events.find(of('a', 'failed'))!;
    expect(failed.code).toBe('NOT_REPLICATED');
    expect(s.acquisitions).toBe(1);
    expect(s.overlaps).toEqual([]);
    expect(s.writes.refused).toBe(0);
    expect(s.writes.staleAccepted).toEqual([]);
    expect(s.staleOperations).toEqual([]);
    expect(s.unsettled).toEqual([]);
  });
});

describe('fault suite, failover after the link was cut under a renewing holder', () => {
  it('WITH acknowledgement: renewals the replica did not acknowledge do not lengthen the lease, so the failover lets nobody in early', async () => {
    rig = await FaultRig.start({ replica: true });
    const ttl = 600;
    // A generous timeout: the acquire must be acknowledged on a loaded machine; renewals during the cut fail at it.
    const replication = { replicas: 1, timeout: 1_000 };
    await rig.spawnWorker('a', { ttl, wait: 1_000, hold: 2_500, rounds: 1, renew: true, replication });
    const granted = await rig.history.waitFor(of('a', 'granted'), 10_000, 'a to be granted');
    expect(granted.replicated).toBe(true);
    await rig.history.waitFor(of('a', 'holding'), 10_000, 'a to hold');
    // b waits for the lock through the failover: it follows the clients to the new primary.
    await rig.spawnWorker('b', { ttl, wait: 8_000, hold: 20, rounds: 1 });
    await rig.history.waitFor(of('b', 'requested'), 10_000, 'b to ask');
    rig.cutReplica();
    // The fault is the cut's length: longer than a TTL, so that the replica's copy of the lock
    // expires while the watchdog renews on the primary alone.
    await new Promise((resolve) => setTimeout(resolve, ttl + 200));
    await rig.failover();
    await rig.history.waitFor(of('b', 'done'), 15_000, 'b to finish');
    await rig.history.waitFor(of('a', 'done'), 15_000, 'a to finish');

    const s = summarize(rig);
    expect(s.overlaps).toEqual([]);
    // a's lease ran out on its last acknowledged renewal, before b was granted, and a saw it lost.
    const [held, next] = grants(rig.history.events);
    expect([held!.p, next!.p]).toEqual(['a', 'b']);
    expect(held!.validUntil < next!.granted).toBe(true);
    expect(rig.history.events.some(of('a', 'lost'))).toBe(true);
    expect(s.fenceOrder).toBe(0);
    expect(s.writes.staleAccepted).toEqual([]);
    expect(s.staleOperations).toEqual([]);
    expect(s.unsettled).toEqual([]);
  });
});

describe('fault suite, failover while an acknowledged acquire waits for its WAIT', () => {
  it('the WAIT that the client sends again after reconnecting to the new primary does not count as acknowledging the acquire', async () => {
    // Found by the soak (seed 211474302, segment 8): the acquire ran on the old primary and its
    // reply came back, its WAIT was pending (the link cut) when the failover reset the connection;
    // ioredis sent the WAIT again on the new connection, where it covers no write, and the new
    // primary's replica answered it: a lease marked replicated that the new primary never had.
    rig = await FaultRig.start({ replica: true });
    rig.cutReplica();
    // Its wait outlasts the WAIT's timeout, so that the acquire is still waiting at the failover.
    const a = await rig.spawnWorker('a', { ttl: 4_000, wait: 5_000, hold: 1_000, rounds: 1, replication: { replicas: 1, timeout: 3_000 } });
    // The acquire script's reply is on its way to a: the fence, an integer reply of 16 digits (µs
    // since the epoch; the connection's other integer replies are short, and INFO's
    // server_time_usec is a line inside a bulk string, not a reply of its own). Its WAIT now waits
    // (up to 3 s) for a replica that cannot answer.
    await a.proxies[0]!.replySeen(/(^|\r\n):\d{15,}\r\n/);
    await rig.failover();
    await rig.addReplica();
    const outcome = await rig.history.waitFor((e) => e.p === 'a' && (e.ev === 'granted' || e.ev === 'failed'), 10_000, 'a to settle');
    await rig.spawnWorker('b', { ttl: 4_000, wait: 5_000, hold: 20, rounds: 1 });
    await rig.history.waitFor(of('b', 'done'), 10_000, 'b to finish');
    await rig.history.waitFor(of('a', 'done'), 10_000, 'a to finish');

    expect(outcome.ev).toBe('failed');
    expect(outcome.code).toBe('NOT_REPLICATED');
    const s = summarize(rig);
    expect(s.acquisitions).toBe(1);
    expect(s.overlaps).toEqual([]);
    expect(s.writes.staleAccepted).toEqual([]);
    expect(s.unsettled).toEqual([]);
  });
});

describe('fault suite, lock keys evicted under maxmemory', () => {
  for (const policy of ['allkeys-lru', 'volatile-lru']) {
    it(`${policy}: the warning is emitted at start; the lock key is evicted while held, the checker sees the overlap, and the fenced resource refuses the stale write`, async () => {
      rig = await FaultRig.start({ nodeArgs: ['--maxmemory-policy', policy] });
      // A limit a little above what the server uses now, so that a few MB of writes evict.
      const used = Number(/used_memory:(\d+)/.exec(await rig.admin(0).info('memory'))![1]);
      await rig.admin(0).config('SET', 'maxmemory', String(used + 2 * 1024 * 1024));
      // a holds until b is done (5 s at most, inside its TTL): the eviction and b's start, however
      // slow the machine, fall inside a's window.
      await rig.spawnWorker('a', { ttl: 6_000, wait: 1_000, hold: 5_000, holdUntilTold: true, rounds: 1 });
      const holding = await rig.history.waitFor(of('a', 'holding'), 10_000, 'a to hold');
      const warning = await rig.history.waitFor(of('a', 'log', (e) => e.latchkey === 'evictionPolicy'), 10_000, "a's eviction-policy warning");
      expect(warning).toMatchObject({ level: 'warn', policy });
      expect(await rig.fillUntilEvicted(0, lockKeys(rig.prefix, rig.key).lock)).toBe(true);
      await rig.spawnWorker('b', { ttl: 6_000, wait: 5_000, hold: 20, rounds: 1 });
      await rig.history.waitFor(of('b', 'done'), 10_000, 'b to finish');
      await rig.endHold('a');
      await rig.history.waitFor(of('a', 'done'), 10_000, 'a to finish');

      const s = summarize(rig);
      expect(s.overlaps).toHaveLength(1);
      expect(s.overlaps[0]!.second.p).toBe('b');
      // The fence counter may have been evicted too: a fence is never below the server's TIME in µs.
      expect(s.fenceOrder).toBe(0);
      expect(s.writes.refusedWrites).toEqual([{ p: 'a', fence: holding.fence }]);
      expect(s.writes.staleAccepted).toEqual([]);
      expect(s.staleOperations).toEqual([]);
      expect(s.unsettled).toEqual([]);
      expect(rig.history.events.filter(of('b', 'log', (e) => e.latchkey === 'evictionPolicy'))).toHaveLength(1);
    });
  }
});

describe('fault suite, a server that stops answering', () => {
  const stalls: Array<[string, (rig: FaultRig) => Promise<void>]> = [
    ['CLIENT PAUSE ALL', (r) => r.clientPause(0, 1_200)],
    ['DEBUG SLEEP', (r) => r.debugSleep(0, 1_200)],
  ];
  for (const [name, stall] of stalls) {
    it(`${name} past the TTL while a renewing holder holds: it reports the loss, the waiter gets the lock after, no overlap`, async () => {
      rig = await FaultRig.start();
      await rig.spawnWorker('a', { ttl: 600, wait: 5_000, hold: 1_800, rounds: 1, renew: true });
      await rig.history.waitFor(of('a', 'holding'), 10_000, 'a to hold');
      await rig.spawnWorker('b', { ttl: 600, wait: 8_000, hold: 20, rounds: 2 });
      await rig.history.waitFor(of('b', 'requested'), 10_000, 'b to ask');
      await stall(rig);
      await rig.history.waitFor(of('a', 'lost'), 10_000, 'a to report the loss');
      await rig.history.waitFor(of('b', 'done'), 15_000, 'b to finish');
      await rig.history.waitFor(of('a', 'done'), 15_000, 'a to finish');

      const s = summarize(rig);
      expect(s.overlaps).toEqual([]);
      expect(s.fenceOrder).toBe(0);
      expect(s.writes.staleAccepted).toEqual([]);
      expect(s.staleOperations).toEqual([]);
      expect(s.unsettled).toEqual([]);
      expect(rig.history.events.filter(of('b', 'granted'))).toHaveLength(2);
    });
  }
});
