/**
 * Checkers over a fault history (see harness.ts). Each returns what it found, never throws, so a
 * test can assert either that a mode is safe (nothing found) or that a fault it cannot survive is
 * seen (an overlap found) while fencing still holds.
 */
import type { HistoryEvent } from './harness.js';

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

/** Faults injected, by kind. */
export function faultCounts(history: readonly HistoryEvent[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const e of history) if (e.p === 'harness' && e.ev === 'fault' && typeof e.kind === 'string') counts[e.kind] = (counts[e.kind] ?? 0) + 1;
  return counts;
}

export const nsFromMs = (value: number): bigint => BigInt(Math.round(value)) * NS_PER_MS;
