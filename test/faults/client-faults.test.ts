/**
 * The short tier, client faults: wall-clock jumps, a drifting monotonic clock (inside and beyond
 * the drift allowance), a lost notification to a waiter, and connection resets in the middle of a
 * watchdog's extend. Worker processes on the built package, the checkers over the history.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { driftFor } from '../../src/clock.js';
import { lockKeys } from '../../src/keys.js';
import { extendManyScript } from '../../src/lua/scripts.generated.js';
import { endTest, eventOf, summarize } from './check.js';
import { grants } from './checkers.js';
import { FaultRig } from './harness.js';
import { queuedOn } from './queue-watch.js';

let rig: FaultRig | undefined;

afterEach((ctx) => endTest(rig, ctx).then(() => (rig = undefined)));

const of = eventOf;

describe('fault suite, client clocks', () => {
  for (const nodes of [1, 3]) {
    it(`wall-clock jumps of an hour, forward and back, on both workers change nothing (${nodes === 1 ? 'single Redis' : 'Redlock over three'})`, async () => {
      rig = await FaultRig.start({ nodes });
      const ttl = 400;
      // Rounds enough that a worker is still running when its last jump comes: the workers are
      // spawned one after the other, and the first ran 10 of 12 rounds before the second started
      // (about 370 ms later) in one run in two here; 40 were over too soon on a busy machine (six busy loops on two cores).
      const options = { ttl, wait: 4_000, hold: 20, rounds: 80, idle: 5 };
      const workers = [await rig.spawnWorker('a', options), await rig.spawnWorker('b', options)];
      for (let i = 0; i < 6; i++) {
        const worker = workers[i % 2]!;
        const before = process.hrtime.bigint();
        worker.jumpClock();
        await rig.history.waitFor(of(worker.id, 'clock-jump'), 10_000, `${worker.id}'s clock to jump`, before);
        // The next jump after this worker's next grant: every jump lands on a lock in use.
        await rig.history.waitFor(of(worker.id, 'granted'), 10_000, `${worker.id} to be granted after the jump`, before);
      }
      await rig.history.waitFor(of('a', 'done'), 20_000, 'a to finish');
      await rig.history.waitFor(of('b', 'done'), 20_000, 'b to finish');

      const s = summarize(rig);
      expect(rig.history.events.filter((e) => e.ev === 'clock-jump')).toHaveLength(6);
      expect(s.faults).toEqual({ 'clock-jump': 6 });
      expect(s.acquisitions).toBe(2 * options.rounds);
      expect(rig.history.events.filter((e) => e.ev === 'failed')).toEqual([]);
      // Validity is on the monotonic clock: every lease's window is at most its TTL less the drift allowance.
      for (const g of grants(rig.history.events)) expect(Number(g.validUntil - g.granted) / 1e6).toBeLessThanOrEqual(ttl - driftFor(ttl, 0.01));
      expect(s.overlaps).toEqual([]);
      // On Redlock the proposed fence is the client's wall clock (µs): a node keeps it above its last one.
      expect(s.fenceOrder).toBe(0);
      expect(s.writes.refused).toBe(0);
      expect(s.writes.staleAccepted).toEqual([]);
      expect(s.staleOperations).toEqual([]);
      expect(s.lostUpdates).toBe(0);
      expect(s.unsettled).toEqual([]);
    });
  }

  /**
   * A holder whose clock runs at `rate` of true time holds past its lease; the key expires on the
   * server's clock after `ttl`, and a waiter takes the lock then. The holder believes its lease
   * ends (ttl - drift) / rate after it asked. It holds until the waiter is done (its write comes
   * after the waiter's however slow the machine), and the waiter has until `ttl` to start and
   * queue.
   */
  async function driftRun(rate: number, ttl: number): Promise<FaultRig> {
    rig = await FaultRig.start();
    await rig.spawnWorker('a', { ttl, wait: 1_000, hold: ttl + 5_000, holdUntilTold: true, rounds: 1, clockRate: rate });
    const holding = await rig.history.waitFor(of('a', 'holding'), 10_000, 'a to hold');
    expect(holding.fence).toBeGreaterThan(0);
    await rig.spawnWorker('b', { ttl, wait: 5_000 + ttl, hold: 20, rounds: 1 });
    await rig.history.waitFor(of('b', 'done'), 10_000 + ttl, 'b to finish');
    await rig.endHold('a');
    await rig.history.waitFor(of('a', 'done'), 10_000, 'a to finish');
    return rig;
  }

  it('a holder clock 0.5% slow is inside the drift allowance (1% + 2 ms): no overlap; its late write is refused', async () => {
    const r = await driftRun(0.995, 1_000);
    const s = summarize(r);
    expect(s.overlaps).toEqual([]);
    expect(s.fenceOrder).toBe(0);
    // It wrote after b was done, past its lease: b had written with a higher fence.
    expect(s.writes.refusedWrites.map((w) => w.p)).toEqual(['a']);
    expect(s.writes.staleAccepted).toEqual([]);
    expect(s.staleOperations).toEqual([]);
  });

  it('a holder clock 20% slow is beyond the drift allowance: the checker sees the overlap, the fenced resource refuses the stale write', async () => {
    // A 3 s TTL: the overlap is the 710 ms the slow clock adds, room for b's wake-up on a busy machine.
    const r = await driftRun(0.8, 3_000);
    const s = summarize(r);
    expect(s.overlaps).toHaveLength(1);
    const [overlap] = s.overlaps;
    expect([overlap!.first.p, overlap!.second.p]).toEqual(['a', 'b']);
    // At most what the slow clock adds: (ttl - drift) / 0.8 - ttl = (3000 - 32) / 0.8 - 3000 = 710 ms, less b's wake-up.
    expect(overlap!.ms).toBeLessThanOrEqual(710);
    expect(s.fenceOrder).toBe(0);
    expect(s.writes.refusedWrites.map((w) => w.p)).toEqual(['a']);
    expect(s.writes.staleAccepted).toEqual([]);
    // a's release found b's token (or nothing) and did not touch it.
    expect(s.staleOperations).toEqual([]);
  });
});

describe('fault suite, waiting and renewing through lost messages', () => {
  it('a lost release notification: the waiter still gets the lock by its periodic re-check, within recheck + 700 ms of the release', async () => {
    rig = await FaultRig.start();
    const recheck = 600;
    // a holds until b is queued (4 s at most, inside its TTL): its release then grants the lock to
    // b, whose message is dropped, however slow the machine is to start b.
    await rig.spawnWorker('a', { ttl: 5_000, wait: 1_000, hold: 4_000, holdUntilTold: true, rounds: 1 });
    await rig.history.waitFor(of('a', 'holding'), 10_000, 'a to hold');
    const b = await rig.spawnWorker('b', { ttl: 5_000, wait: 8_000, hold: 20, rounds: 1, recheck });
    rig.history.note('fault', { kind: 'drop-notifications', of: 'b' });
    b.proxies[0]!.dropMessages();
    const dropped = new Promise<void>((resolve) => b.proxies[0]!.once('dropped', () => resolve()));
    await rig.history.waitFor(of('b', 'requested'), 10_000, 'b to ask');
    await queuedOn(rig.admin(0), lockKeys(rig.prefix, rig.key).queue, 1, 10_000);
    await rig.endHold('a');
    await dropped;
    await rig.history.waitFor(of('b', 'done'), 10_000, 'b to finish');

    const s = summarize(rig);
    expect(b.proxies[0]!.counts.droppedMessages).toBeGreaterThanOrEqual(1);
    expect(s.handoffs.map((h) => [h.from.p, h.from.endedBy, h.to.p])).toEqual([['a', 'release', 'b']]);
    // Not woken by the message (dropped), nor left to a's TTL (5 s): by the next re-check.
    expect(s.handoffs[0]!.ms).toBeLessThanOrEqual(recheck + 700);
    expect(s.overlaps).toEqual([]);
    expect(s.unsettled).toEqual([]);
  });

  // On one Redis the watchdog renews in batches: its extend is extend-many.lua's call.
  it('connection resets in the middle of the watchdog\'s extend, before and after it reaches Redis: the lease is kept or reported lost, never two holders', async () => {
    rig = await FaultRig.start();
    const a = await rig.spawnWorker('a', { ttl: 600, wait: 4_000, hold: 2_000, rounds: 2, renew: true, idle: 5 });
    await rig.spawnWorker('b', { ttl: 600, wait: 8_000, hold: 20, rounds: 4, idle: 5 });
    const within = <T>(promise: Promise<T>, what: string): Promise<T> =>
      Promise.race([promise, new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`no ${what} within 10 s`)), 10_000))]);
    for (const forward of [true, false, true, false]) {
      const kind = `reset-extend-${forward ? 'after' : 'before'}-send`;
      expect(await within(a.proxies[0]!.resetOn(extendManyScript.sha, { forward }), kind)).toBe(true);
      rig.history.note('fault', { kind, of: 'a' });
    }
    await rig.history.waitFor(of('a', 'done'), 20_000, 'a to finish');
    await rig.history.waitFor(of('b', 'done'), 20_000, 'b to finish');

    const s = summarize(rig);
    expect(Object.values(s.faults).reduce((x, y) => x + y, 0)).toBe(4);
    expect(s.overlaps).toEqual([]);
    expect(s.fenceOrder).toBe(0);
    expect(s.writes.staleAccepted).toEqual([]);
    expect(s.staleOperations).toEqual([]);
    expect(s.unsettled).toEqual([]);
    // Each of a's leases was either kept to its release (its write accepted) or reported lost.
    for (const g of grants(rig.history.events).filter((x) => x.p === 'a')) {
      const kept = rig.history.events.some(of('a', 'released', (e) => e.n === g.n));
      const lost = rig.history.events.some(of('a', 'lost', (e) => e.n === g.n));
      expect(kept !== lost).toBe(true);
    }
    expect(s.acquisitions).toBe(6);
  });
});
