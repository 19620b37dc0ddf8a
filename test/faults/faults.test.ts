/**
 * The short tier of the fault suite: each fault once, on real redis-server processes, with worker
 * processes that use the built package through fault proxies. Every test runs the checkers over
 * the history (check.ts) and asserts what the mode promises under that fault.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { acquireScript, releaseScript } from '../../src/lua/scripts.generated.js';
import { SETTLE_SLACK, endTest, eventOf, summarize } from './check.js';
import { FaultRig } from './harness.js';

let rig: FaultRig | undefined;

afterEach((ctx) => endTest(rig, ctx).then(() => (rig = undefined)));

const of = eventOf;

/** Bound on the time from a dead holder's validity end to the next grant (ms): drift allowance + a waiter's wake-up on a loaded machine. */
const RECOVERY_BOUND = 600;

describe('fault suite, single Redis', () => {
  it('holder crash (SIGKILL): the lock is taken again soon after the dead lease\'s validity, never before', async () => {
    rig = await FaultRig.start();
    // a holds long enough for b's process to start and ask while a still holds (a 400 ms hold was
    // sometimes over before b asked on a loaded machine: a then released instead of dying).
    const a = await rig.spawnWorker('a', { ttl: 2_000, wait: 5_000, hold: 1_500, rounds: 1 });
    const holding = await rig.history.waitFor(of('a', 'holding'), 10_000, 'a to hold');
    const b = await rig.spawnWorker('b', { ttl: 600, wait: 5_000, hold: 20, rounds: 3 });
    await rig.history.waitFor(of('b', 'requested'), 10_000, 'b to ask');
    await a.kill();
    await rig.history.waitFor(of('b', 'done'), 15_000, 'b to finish');
    await b.exited;

    const s = summarize(rig);
    expect(s.acquisitions).toBe(4);
    expect(s.overlaps).toEqual([]);
    expect(s.fenceOrder).toBe(0);
    expect(s.writes.staleAccepted).toEqual([]);
    expect(s.unsettled).toEqual([]);
    expect(s.recoveries).toHaveLength(1);
    const [recovery] = s.recoveries;
    expect(recovery!.dead.fence).toBe(holding.fence);
    expect(recovery!.next?.p).toBe('b');
    // Never before the dead lease's validity ends (that would be an overlap), and soon after it.
    expect(recovery!.afterValidity).toBeGreaterThan(0);
    expect(recovery!.afterValidity).toBeLessThan(RECOVERY_BOUND);
  });

  it('holder paused past its TTL (SIGSTOP, SIGCONT) writes on waking: the fenced resource refuses it', async () => {
    rig = await FaultRig.start();
    const a = await rig.spawnWorker('a', { ttl: 500, wait: 5_000, hold: 300, rounds: 1 });
    const holding = await rig.history.waitFor(of('a', 'holding'), 10_000, 'a to hold');
    a.pause();
    await rig.spawnWorker('b', { ttl: 500, wait: 5_000, hold: 20, rounds: 2 });
    // b gets the lock once a's key expired, and writes with a higher fence.
    await rig.history.waitFor(of('b', 'write-accepted'), 10_000, 'b to write');
    a.resume();
    await rig.history.waitFor(of('a', 'done'), 10_000, 'a to finish');
    await rig.history.waitFor(of('b', 'done'), 10_000, 'b to finish');

    const s = summarize(rig);
    // a was stopped before it wrote: its write came after b's, and was refused.
    const attempted = rig.history.events.find(of('a', 'write-attempted'))!;
    expect(attempted.t > rig.history.events.find(of('b', 'write-accepted'))!.t).toBe(true);
    expect(s.writes.refusedWrites).toEqual([{ p: 'a', fence: holding.fence }]);
    expect(s.writes.staleAccepted).toEqual([]);
    // The leases themselves never overlapped: a's validity ended while it was stopped.
    expect(s.overlaps).toEqual([]);
    expect(s.fenceOrder).toBe(0);
    expect(s.unsettled).toEqual([]);
    // The unfenced counter has no such defence: a's read-modify-write lost b's update.
    expect(s.lostUpdates).toBeGreaterThanOrEqual(1);
    // a's release finds the lock gone or taken, and leaves b alone.
    const release = rig.history.events.find(of('a', 'release-failed'));
    expect(release?.code).toBe('LEASE_LOST');
  });

  it('partition (black hole) between a renewing holder and Redis: its signal reports the loss, and no valid windows overlap', async () => {
    rig = await FaultRig.start();
    // a holds until b has written (5 s at most): its write comes after b's, however slow the
    // machine is to start b.
    const a = await rig.spawnWorker('a', { ttl: 600, wait: 5_000, hold: 5_000, holdUntilTold: true, rounds: 1, renew: true });
    await rig.history.waitFor(of('a', 'holding'), 10_000, 'a to hold');
    rig.history.note('fault', { kind: 'partition', of: 'a' });
    a.proxies[0]!.blackHole();
    await rig.spawnWorker('b', { ttl: 600, wait: 5_000, hold: 20, rounds: 2 });
    const lost = await rig.history.waitFor(of('a', 'lost'), 10_000, 'a to report the loss');
    expect(lost.reason).toBe('unreachable');
    await rig.history.waitFor(of('b', 'write-accepted'), 10_000, 'b to write');
    await rig.endHold('a');
    await rig.history.waitFor(of('a', 'write-refused'), 10_000, 'a to write late');
    a.proxies[0]!.heal();
    rig.history.note('heal', { kind: 'partition', of: 'a' });
    await rig.history.waitFor(of('a', 'done'), 10_000, 'a to finish');
    await rig.history.waitFor(of('b', 'done'), 10_000, 'b to finish');

    const s = summarize(rig);
    expect(s.overlaps).toEqual([]);
    expect(s.fenceOrder).toBe(0);
    expect(s.writes.staleAccepted).toEqual([]);
    expect(s.writes.refusedWrites.map((w) => w.p)).toEqual(['a']);
    expect(s.unsettled).toEqual([]);
    expect(s.acquisitions).toBe(3);
  });

  it('an acquire through a partition settles by its wait (UNREACHABLE: no reply), with or without an ioredis commandTimeout', async () => {
    rig = await FaultRig.start();
    const wait = 800;
    // A rest of 1.5 s after each round: the partition starts before the next request.
    const [hung, bounded] = await Promise.all([
      rig.spawnWorker('hung', { ttl: 600, wait, hold: 15, rounds: 2, idle: 1_500 }),
      rig.spawnWorker('bounded', { ttl: 600, wait, hold: 15, rounds: 2, idle: 1_500, commandTimeout: 300 }),
    ]);
    await rig.history.waitFor(of('hung', 'released'), 10_000, 'hung to take the lock once');
    await rig.history.waitFor(of('bounded', 'released'), 10_000, 'bounded to take the lock once');
    const cut = rig.history.note('fault', { kind: 'partition-acquirer' }).t;
    hung!.proxies[0]!.blackHole();
    bounded!.proxies[0]!.blackHole();
    const asked = await rig.history.waitFor((e) => e.p === 'hung' && e.ev === 'requested' && e.n === 1, 10_000, 'hung to ask again', cut);
    // The bounded worker's next acquire fails within its wait plus slack: its attempts that the
    // client's own timeout ended count as unanswered, tried again until latchkey's deadline, which
    // reports Redis unreachable (a BackendError with code UNREACHABLE), as without the timeout...
    const failed = await rig.history.waitFor(of('bounded', 'failed'), 10_000, 'bounded to fail', cut);
    expect(failed.code).toBe('UNREACHABLE');
    // ...and the other one's, with no command timeout, still ends at its wait: the attempt in
    // flight is bounded by the waiter's deadline, not by Redis answering.
    const outcome = await rig.history.waitFor((e) => e.p === 'hung' && e.n === 1 && (e.ev === 'failed' || e.ev === 'granted'), wait + SETTLE_SLACK + 100, 'hung to settle', asked.t);
    expect(outcome.ev).toBe('failed');
    // Its attempt got no reply at all: Redis is reported unreachable, not the lock as held (issue 18).
    expect(outcome.code).toBe('UNREACHABLE');
    const s = summarize(rig);
    expect(s.unsettled).toEqual([]);
    expect(s.overlaps).toEqual([]);
    expect(s.writes.staleAccepted).toEqual([]);
  });

  it('connection resets in the middle of acquire and release: no double holders, no hung acquire', async () => {
    rig = await FaultRig.start();
    // Rounds enough that both workers are still taking turns when the plan's last step comes, even
    // when the machine is slow to start the second (25 rounds were over by then on a busy one).
    const options = { ttl: 500, wait: 4_000, hold: 15, rounds: 100, idle: 5 };
    const a = await rig.spawnWorker('a', options);
    const b = await rig.spawnWorker('b', options);
    const within = <T>(promise: Promise<T>, what: string): Promise<T> =>
      Promise.race([promise, new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`no ${what} within 10 s`)), 10_000))]);
    // Alternate: the command reaches Redis and its reply is lost, or the command never arrives.
    const plan = [
      { worker: a, sha: acquireScript.sha, forward: true, kind: 'reset-acquire-after-send' },
      { worker: b, sha: acquireScript.sha, forward: false, kind: 'reset-acquire-before-send' },
      { worker: a, sha: releaseScript.sha, forward: true, kind: 'reset-release-after-send' },
      { worker: b, sha: releaseScript.sha, forward: false, kind: 'reset-release-before-send' },
      { worker: b, sha: acquireScript.sha, forward: true, kind: 'reset-acquire-after-send' },
      { worker: a, sha: releaseScript.sha, forward: false, kind: 'reset-release-before-send' },
    ];
    for (const step of plan) {
      const hit = step.worker.proxies[0]!.resetOn(step.sha, { forward: step.forward });
      expect(await within(hit, step.kind)).toBe(true);
      rig.history.note('fault', { kind: step.kind, of: step.worker.id });
    }
    await rig.history.waitFor(of('a', 'done'), 30_000, 'a to finish');
    await rig.history.waitFor(of('b', 'done'), 30_000, 'b to finish');

    const s = summarize(rig);
    expect(Object.values(s.faults).reduce((x, y) => x + y, 0)).toBe(plan.length);
    expect(s.overlaps).toEqual([]);
    expect(s.fenceOrder).toBe(0);
    expect(s.writes.staleAccepted).toEqual([]);
    expect(s.unsettled).toEqual([]);
    expect(s.lostUpdates).toBe(0);
    expect(s.acquisitions).toBeGreaterThanOrEqual(40);
  });

  it('Redis restarted WITHOUT persistence while a lease is held: the checker sees the overlap, and the fenced resource refuses the stale write', async () => {
    rig = await FaultRig.start({ persistence: false });
    // a holds until b is done (4 s at most, inside its TTL): the restart and b's start, however
    // slow the machine, fall inside a's window.
    await rig.spawnWorker('a', { ttl: 5_000, wait: 5_000, hold: 4_000, holdUntilTold: true, rounds: 1 });
    const holding = await rig.history.waitFor(of('a', 'holding'), 10_000, 'a to hold');
    await rig.restartNode(0);
    await rig.spawnWorker('b', { ttl: 5_000, wait: 5_000, hold: 20, rounds: 1 });
    await rig.history.waitFor(of('b', 'done'), 10_000, 'b to finish');
    await rig.endHold('a');
    await rig.history.waitFor(of('a', 'done'), 10_000, 'a to finish');

    const s = summarize(rig);
    // The mode cannot be safe here, and the checker sees it: b was granted inside a's window.
    expect(s.overlaps).toHaveLength(1);
    expect(s.overlaps[0]!.first.p).toBe('a');
    expect(s.overlaps[0]!.second.p).toBe('b');
    // Fences kept increasing through the loss (the server clock), so fencing holds.
    expect(s.fenceOrder).toBe(0);
    expect(s.writes.refusedWrites).toEqual([{ p: 'a', fence: holding.fence }]);
    expect(s.writes.staleAccepted).toEqual([]);
    expect(s.unsettled).toEqual([]);
    expect((await rig.fencedState()).value).toMatch(/^b:/);
  });

  it('Redis restarted WITH persistence (appendfsync always) while a lease is held: no overlap, no write refused', async () => {
    rig = await FaultRig.start({ persistence: true });
    await rig.spawnWorker('a', { ttl: 3_000, wait: 5_000, hold: 600, rounds: 1 });
    await rig.history.waitFor(of('a', 'holding'), 10_000, 'a to hold');
    await rig.restartNode(0);
    await rig.spawnWorker('b', { ttl: 3_000, wait: 8_000, hold: 20, rounds: 1 });
    await rig.history.waitFor(of('b', 'done'), 15_000, 'b to finish');
    await rig.history.waitFor(of('a', 'done'), 10_000, 'a to finish');

    const s = summarize(rig);
    expect(s.acquisitions).toBe(2);
    expect(s.overlaps).toEqual([]);
    expect(s.fenceOrder).toBe(0);
    expect(s.writes.refused).toBe(0);
    expect(s.writes.staleAccepted).toEqual([]);
    expect(s.unsettled).toEqual([]);
    // b got the lock only when a released it: after a sent its release. Not after a's 'released'
    // event: the release script grants the lock to b and publishes it, so b may hear of its grant
    // before a hears the script's reply (seen once under load in npm test).
    const releaseSent = rig.history.events.find(of('a', 'release-sent'))!;
    expect(rig.history.events.find(of('b', 'granted'))!.t > releaseSent.t).toBe(true);
  });

  it('acquire replies held in flight: a short stall shortens the lease, a stall past the TTL hands out no lease from the late reply (a new attempt gets it)', async () => {
    rig = await FaultRig.start();
    const ttl = 600;
    const a = await rig.spawnWorker('a', { ttl, wait: 3_000, hold: 10, rounds: 3, idle: 400 });
    const proxy = a.proxies[0]!;
    for (const [n, stall] of [[1, 200], [2, ttl + 200]] as const) {
      await rig.history.waitFor((e) => e.p === 'a' && e.ev === 'released' && e.n === n - 1, 10_000, `a to finish round ${n - 1}`);
      proxy.holdReplies();
      const asked = await rig.history.waitFor((e) => e.p === 'a' && e.ev === 'requested' && e.n === n, 10_000, `a to ask (round ${n})`);
      rig.history.note('fault', { kind: 'hold-replies', of: 'a', ms: stall });
      await new Promise<void>((resolve) => proxy.once('held', () => resolve()));
      // The stall is the fault itself: its length is the point of the test.
      await new Promise((resolve) => setTimeout(resolve, stall));
      proxy.deliverReplies();
      const healed = rig.history.note('heal', { kind: 'hold-replies', of: 'a' }).t;
      const outcome = await rig.history.waitFor((e) => e.p === 'a' && e.n === n && (e.ev === 'granted' || e.ev === 'failed'), 10_000, `a's round ${n}`);
      if (n === 1) {
        expect(outcome.ev).toBe('granted');
        // Validity counts from the send: the stall came off what was left of the lease when it was granted.
        expect(Number(outcome.validUntil! - outcome.t) / 1e6).toBeLessThan(ttl - stall);
        expect(Number(outcome.validUntil! - asked.t) / 1e6).toBeLessThanOrEqual(ttl);
      } else {
        // The late reply was given back; the lease handed out comes from a new attempt sent after
        // the stall (its validity ends more than half a TTL after the replies were delivered).
        expect(outcome.ev).toBe('granted');
        expect(Number(outcome.validUntil! - healed) / 1e6).toBeGreaterThan(ttl / 2);
      }
    }
    await rig.history.waitFor(of('a', 'done'), 10_000, 'a to finish');
    const s = summarize(rig);
    expect(s.overlaps).toEqual([]);
    expect(s.writes.staleAccepted).toEqual([]);
    expect(s.unsettled).toEqual([]);
  });
});

describe('fault suite, Redlock over three masters', () => {
  it('a minority partitioned from each worker in turn: every acquire succeeds, no overlap, fences in order', async () => {
    rig = await FaultRig.start({ nodes: 3 });
    const options = { ttl: 600, wait: 4_000, hold: 15, rounds: 20, idle: 5 };
    // a loses node 0, b loses node 1, each as soon as it started (a may finish its rounds while b
    // starts on a busy machine); later a loses node 2: always a minority.
    const a = await rig.spawnWorker('a', options);
    const aCut = rig.history.note('fault', { kind: 'partition-minority', of: 'a', node: 0 }).t;
    a.proxies[0]!.blackHole();
    const b = await rig.spawnWorker('b', options);
    const bCut = rig.history.note('fault', { kind: 'partition-minority', of: 'b', node: 1 }).t;
    b.proxies[1]!.blackHole();
    await rig.history.waitFor((e) => e.p === 'a' && e.ev === 'released', 10_000, 'a to hold and release once without node 0', aCut);
    await rig.history.waitFor((e) => e.p === 'b' && e.ev === 'released', 10_000, 'b to hold and release once without node 1', bCut);
    a.proxies[0]!.heal();
    rig.history.note('heal', { kind: 'partition-minority', of: 'a', node: 0 });
    rig.history.note('fault', { kind: 'partition-minority', of: 'a', node: 2 });
    a.proxies[2]!.blackHole();
    await rig.history.waitFor(of('a', 'done'), 30_000, 'a to finish');
    await rig.history.waitFor(of('b', 'done'), 30_000, 'b to finish');

    const s = summarize(rig);
    expect(s.acquisitions).toBe(40);
    expect(rig.history.events.filter((e) => e.ev === 'failed')).toEqual([]);
    expect(s.overlaps).toEqual([]);
    expect(s.fenceOrder).toBe(0);
    expect(s.writes.staleAccepted).toEqual([]);
    expect(s.writes.refused).toBe(0);
    expect(s.lostUpdates).toBe(0);
    expect(s.unsettled).toEqual([]);
  });

  it('a majority partitioned from one worker: its acquires fail cleanly within their wait, the other works on, and it recovers after healing', async () => {
    rig = await FaultRig.start({ nodes: 3 });
    const a = await rig.spawnWorker('a', { ttl: 600, wait: 800, hold: 15, rounds: 4, idle: 5 });
    rig.history.note('fault', { kind: 'partition-majority', of: 'a', nodes: [0, 1] });
    a.proxies[0]!.blackHole();
    a.proxies[1]!.blackHole();
    await rig.spawnWorker('b', { ttl: 600, wait: 4_000, hold: 15, rounds: 10, idle: 5 });
    // Two failed attempts, then heal.
    await rig.history.waitFor((e) => e.p === 'a' && e.ev === 'failed' && e.n === 1, 10_000, 'a to fail twice');
    a.proxies[0]!.heal();
    a.proxies[1]!.heal();
    rig.history.note('heal', { kind: 'partition-majority', of: 'a', nodes: [0, 1] });
    await rig.history.waitFor(of('a', 'done'), 20_000, 'a to finish');
    await rig.history.waitFor(of('b', 'done'), 20_000, 'b to finish');

    const s = summarize(rig);
    const failed = rig.history.events.filter((e) => e.ev === 'failed');
    expect(failed.filter((e) => e.n! <= 1).map((e) => [e.p, e.n, e.code])).toEqual([
      ['a', 0, 'QUORUM'],
      ['a', 1, 'QUORUM'],
    ]);
    // b never failed; a got the lock in its rounds after the heal.
    expect(failed.filter((e) => e.p === 'b')).toEqual([]);
    expect(rig.history.events.filter(of('a', 'granted')).length).toBeGreaterThanOrEqual(1);
    expect(rig.history.events.filter(of('b', 'granted'))).toHaveLength(10);
    expect(s.overlaps).toEqual([]);
    expect(s.fenceOrder).toBe(0);
    expect(s.writes.staleAccepted).toEqual([]);
    expect(s.unsettled).toEqual([]);
  });
});
