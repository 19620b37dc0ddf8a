/**
 * Checkers over a fault history (see harness.ts). Each returns what it found, never throws, so a
 * test can assert either that a mode is safe (nothing found) or that a fault it cannot survive is
 * seen (an overlap found) while fencing still holds.
 */
import type { HistoryEvent } from './history.js';

const NS_PER_MS = 1_000_000n;
const ms = (ns: bigint): number => Number(ns) / 1e6;

/** One lease as its holder claimed it: from the grant to the first of its validity end, its release, its loss or its death. */
export interface Grant {
  readonly p: string;
  readonly n: number;
  readonly fence: number;
  readonly granted: bigint;
  /** The last validity end the holder reported (watchdog renewals move it). */
  readonly validUntil: bigint;
  /** End of the claimed window. */
  readonly end: bigint;
  /** Why the window ended: 'valid' (its validity ran out), 'release', 'lost', 'died'. */
  readonly endedBy: 'valid' | 'release' | 'lost' | 'died';
}

export function grants(history: readonly HistoryEvent[]): Grant[] {
  const out: Grant[] = [];
  const deaths = new Map<string, bigint>();
  for (const e of history) {
    if (e.p === 'harness' && e.ev === 'exit' && typeof e.of === 'string') deaths.set(e.of, e.t);
  }
  for (const g of history) {
    if (g.ev !== 'granted' || g.validUntil === undefined) continue;
    const same = (e: HistoryEvent): boolean => e.p === g.p && e.n === g.n && e.t >= g.t;
    let validUntil = g.validUntil;
    for (const e of history) if (e.ev === 'valid' && same(e) && e.validUntil !== undefined && e.validUntil > validUntil) validUntil = e.validUntil;
    let end = validUntil;
    let endedBy: Grant['endedBy'] = 'valid';
    const release = history.find((e) => e.ev === 'release-sent' && same(e));
    if (release && release.t < end) [end, endedBy] = [release.t, 'release'];
    const lost = history.find((e) => e.ev === 'lost' && same(e));
    if (lost && lost.t < end) [end, endedBy] = [lost.t, 'lost'];
    const death = deaths.get(g.p);
    if (death !== undefined && death < end) [end, endedBy] = [death, 'died'];
    out.push({ p: g.p, n: g.n ?? -1, fence: g.fence ?? -1, granted: g.t, validUntil, end, endedBy });
  }
  return out.sort((a, b) => (a.granted < b.granted ? -1 : a.granted > b.granted ? 1 : 0));
}

export interface Overlap {
  readonly first: Grant;
  readonly second: Grant;
  /** How long both windows were open at once, in ms. */
  readonly ms: number;
}

/** (a) Two holders whose claimed validity windows overlap in real time. */
export function overlaps(history: readonly HistoryEvent[]): Overlap[] {
  const list = grants(history);
  const found: Overlap[] = [];
  for (let i = 0; i < list.length; i++) {
    for (let j = i + 1; j < list.length; j++) {
      const a = list[i]!;
      const b = list[j]!;
      if (b.granted >= a.end) continue; // sorted by grant: b starts after a ended
      if (b.end <= b.granted || a.end <= a.granted) continue; // an empty window (granted already past its end)
      const until = a.end < b.end ? a.end : b.end;
      found.push({ first: a, second: b, ms: ms(until - b.granted) });
    }
  }
  return found;
}

/** (b) Fences unique and strictly increasing in the real-time order of grants. */
export function fenceOrderViolations(history: readonly HistoryEvent[]): Array<{ before: Grant; after: Grant }> {
  const list = grants(history);
  const found: Array<{ before: Grant; after: Grant }> = [];
  let best: Grant | undefined;
  for (const g of list) {
    if (best && g.fence <= best.fence) found.push({ before: best, after: g });
    if (!best || g.fence > best.fence) best = g;
  }
  return found;
}

export interface WriteReport {
  attempted: number;
  accepted: number;
  refused: number;
  /** Writes accepted although a write with a higher fence had been accepted before they were attempted. */
  staleAccepted: Array<{ p: string; fence: number; highest: number }>;
  /** Writes refused: each by a holder that a newer fence had already superseded. */
  refusedWrites: Array<{ p: string; fence: number }>;
}

/** (c) Stale writes accepted by the fenced resource. */
export function fencedWrites(history: readonly HistoryEvent[]): WriteReport {
  const report: WriteReport = { attempted: 0, accepted: 0, refused: 0, staleAccepted: [], refusedWrites: [] };
  const accepted = history.filter((e) => e.ev === 'write-accepted');
  for (const e of history) {
    if (e.ev === 'write-attempted') report.attempted++;
    if (e.ev === 'write-refused') {
      report.refused++;
      report.refusedWrites.push({ p: e.p, fence: e.fence ?? -1 });
    }
    if (e.ev !== 'write-accepted') continue;
    report.accepted++;
    const attempt = history.find((a) => a.ev === 'write-attempted' && a.p === e.p && a.n === e.n && a.t <= e.t);
    const since = attempt?.t ?? e.t;
    let highest = -1;
    for (const other of accepted) if (other.t < since && (other.fence ?? -1) > highest) highest = other.fence ?? -1;
    if ((e.fence ?? -1) < highest) report.staleAccepted.push({ p: e.p, fence: e.fence ?? -1, highest });
  }
  return report;
}

/** The unfenced resource: read-modify-writes that read the same value (all but one update lost). */
export function lostUpdates(history: readonly HistoryEvent[]): number {
  const reads = new Map<number, number>();
  for (const e of history) if (e.ev === 'counter-written' && e.read !== undefined) reads.set(e.read, (reads.get(e.read) ?? 0) + 1);
  let lost = 0;
  for (const count of reads.values()) lost += count - 1;
  return lost;
}

export interface Unsettled {
  readonly p: string;
  readonly n: number;
  /** ms it took (Infinity: never settled although its process lived on). */
  readonly took: number;
  readonly allowed: number;
}

/**
 * (d) Every acquire settles (granted or failed) within its wait plus `slackMs`, not counting time
 * its process spent stopped by the harness; an acquire whose process died first is excused. An
 * acquire still pending counts from its request to `now` (the time of the check).
 */
export function unsettledAcquires(history: readonly HistoryEvent[], slackMs: number, now: bigint = process.hrtime.bigint()): Unsettled[] {
  const found: Unsettled[] = [];
  const end = history.reduce((max, e) => (e.t > max ? e.t : max), now);
  for (const r of history) {
    if (r.ev !== 'requested') continue;
    const outcome = history.find((e) => (e.ev === 'granted' || e.ev === 'failed') && e.p === r.p && e.n === r.n);
    const died = history.find((e) => e.p === 'harness' && e.ev === 'exit' && e.of === r.p && e.t >= r.t);
    const until = outcome?.t ?? died?.t ?? end;
    const stopped = pausedWithin(history, r.p, r.t, until);
    const allowed = (r.wait ?? 0) + slackMs + ms(stopped);
    const took = ms(until - r.t);
    if (outcome ? took > allowed : !died && took > allowed) found.push({ p: r.p, n: r.n ?? -1, took: outcome ? took : Infinity, allowed });
  }
  return found;
}

function pausedWithin(history: readonly HistoryEvent[], p: string, from: bigint, to: bigint): bigint {
  let total = 0n;
  for (const e of history) {
    if (e.p !== 'harness' || e.ev !== 'fault' || e.kind !== 'pause-worker' || e.of !== p) continue;
    const heal = history.find((h) => h.p === 'harness' && h.ev === 'heal' && h.kind === 'pause-worker' && h.of === p && h.t >= e.t);
    const a = e.t > from ? e.t : from;
    const b = (heal?.t ?? to) < to ? (heal?.t ?? to) : to;
    if (b > a) total += b - a;
  }
  return total;
}

export interface Recovery {
  readonly dead: Grant;
  /** The next grant to anyone after the death, if any. */
  readonly next: Grant | undefined;
  /** ms from the dead holder's validity end to the next grant (negative: before it). */
  readonly afterValidity: number | undefined;
}

/**
 * (e) After a holder dies holding the lock, when is it taken again? Measured from the end of the
 * dead lease's validity; a test asserts `afterValidity <= bound` (the key outlives the validity by
 * the drift allowance, then a waiter needs its wake-up).
 */
export function recoveries(history: readonly HistoryEvent[]): Recovery[] {
  const list = grants(history);
  return list
    .filter((g) => g.endedBy === 'died')
    .map((dead) => {
      const next = list.find((g) => g.granted > dead.end && g.p !== dead.p);
      return { dead, next, afterValidity: next ? ms(next.granted - dead.validUntil) : undefined };
    });
}

export interface StaleOperation {
  /** The holder whose release or extend reported success. */
  readonly p: string;
  readonly n: number;
  readonly fence: number;
  /** When the holder was granted the lease the operation was on (ns). */
  readonly granted: bigint;
  readonly op: 'release' | 'extend';
  /** When it was sent (ns). */
  readonly sent: bigint;
  /** Why it is stale: another holder was granted the lock before it was sent, or it was sent after its own validity. */
  readonly why: 'after-another-grant' | 'after-own-validity';
  /** The other holder's grant, for 'after-another-grant'. */
  readonly other?: Grant;
}

/**
 * (f) A stale holder never releases or extends another's lock. Every release that reported success
 * (`released`, sent at `release-sent`) and every extension (`valid`, sent at its `sent`) must have
 * been sent before any later holder was granted the lock: that grant was executed by Redis before
 * the operation was, so the lock held the other holder's token, and an operation that matched it
 * acted on the other's lock. (A release that hands the lock to a waiter grants it after the
 * release was sent, so it is not counted.) An extension must also be sent within the holder's own
 * validity (the watchdog never extends a lease it counts expired); `toleranceMs` covers the
 * worker's rounding of `sent`.
 */
export function staleOperations(history: readonly HistoryEvent[], toleranceMs = 2): StaleOperation[] {
  const list = grants(history);
  const found: StaleOperation[] = [];
  const tolerance = nsFromMs(toleranceMs);
  for (const g of list) {
    const mine = (e: HistoryEvent): boolean => e.p === g.p && e.n === g.n && e.t >= g.granted;
    const ops: Array<{ op: 'release' | 'extend'; sent: bigint; validBefore?: bigint }> = [];
    if (history.some((e) => e.ev === 'released' && mine(e))) {
      const sent = history.find((e) => e.ev === 'release-sent' && mine(e));
      if (sent) ops.push({ op: 'release', sent: sent.t });
    }
    let valid = history.find((e) => e.ev === 'granted' && e.p === g.p && e.n === g.n)?.validUntil ?? g.validUntil;
    for (const e of history) {
      if (e.ev !== 'valid' || !mine(e) || e.sent === undefined) continue;
      const sent = BigInt(e.sent as string | bigint);
      ops.push({ op: 'extend', sent, validBefore: valid });
      if (e.validUntil !== undefined && e.validUntil > valid) valid = e.validUntil;
    }
    for (const o of ops) {
      const other = list.find((x) => x.p !== g.p && x.granted > g.granted && x.granted < o.sent);
      if (other) found.push({ p: g.p, n: g.n, fence: g.fence, granted: g.granted, op: o.op, sent: o.sent, why: 'after-another-grant', other });
      else if (o.validBefore !== undefined && o.sent > o.validBefore + tolerance) {
        found.push({ p: g.p, n: g.n, fence: g.fence, granted: g.granted, op: o.op, sent: o.sent, why: 'after-own-validity' });
      }
    }
  }
  return found;
}

export interface Handoff {
  /** The holder whose lease ended, and how. */
  readonly from: Grant;
  /** The next grant, to a process that was already waiting when `from` ended. */
  readonly to: Grant;
  /** ms from the end of `from` (its release, loss, death or validity end) to the grant of `to`. */
  readonly ms: number;
}

/**
 * (g) How long the lock stayed free while someone waited: for each lease that ended (released,
 * lost, died or ran out), the next grant to another process whose request came before that end.
 * A test asserts `ms` under the bound that the waiting design promises (a lost notification still
 * wakes the waiter by its periodic re-check or the holder's remaining TTL).
 */
export function handoffs(history: readonly HistoryEvent[]): Handoff[] {
  const list = grants(history);
  const found: Handoff[] = [];
  for (const from of list) {
    const to = list.find((g) => g.granted >= from.end && g.p !== from.p);
    if (!to) continue;
    const asked = history.find((e) => e.ev === 'requested' && e.p === to.p && e.n === to.n);
    if (!asked || asked.t > from.end) continue;
    found.push({ from, to, ms: ms(to.granted - from.end) });
  }
  return found;
}

/** Faults injected, by kind. */
export function faultCounts(history: readonly HistoryEvent[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const e of history) if (e.p === 'harness' && e.ev === 'fault' && typeof e.kind === 'string') counts[e.kind] = (counts[e.kind] ?? 0) + 1;
  return counts;
}

export const nsFromMs = (value: number): bigint => BigInt(Math.round(value)) * NS_PER_MS;
