/**
 * Runs every checker over a rig's history and gives one summary a test can assert on; on a failed
 * assertion the test keeps the history as JSON lines (see `keepHistory`).
 */
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  faultCounts,
  fenceOrderViolations,
  fencedWrites,
  grants,
  handoffs,
  lostUpdates,
  overlaps,
  recoveries,
  staleOperations,
  unsettledAcquires,
  type Handoff,
  type Overlap,
  type Recovery,
  type StaleOperation,
  type Unsettled,
  type WriteReport,
} from './checkers.js';
import type { FaultRig } from './harness.js';
import type { History, HistoryEvent } from './history.js';

export interface Summary {
  readonly acquisitions: number;
  readonly overlaps: Overlap[];
  readonly fenceOrder: number;
  readonly writes: WriteReport;
  readonly lostUpdates: number;
  readonly unsettled: Unsettled[];
  readonly recoveries: Recovery[];
  /** Releases and extensions that reported success but acted on another holder's lock (or past their own validity). */
  readonly staleOperations: StaleOperation[];
  readonly handoffs: Handoff[];
  readonly faults: Record<string, number>;
}

/** Slack over an acquire's own wait before it counts as hung (ms): a loaded 2-core machine. */
export const SETTLE_SLACK = 1_500;

/** Any rig with a history: the FaultRig, or the ClusterRig of the soak's cluster mode. */
export function summarize(rig: { readonly history: History }): Summary {
  const h = rig.history.events;
  return {
    acquisitions: grants(h).length,
    overlaps: overlaps(h),
    fenceOrder: fenceOrderViolations(h).length,
    writes: fencedWrites(h),
    lostUpdates: lostUpdates(h),
    unsettled: unsettledAcquires(h, SETTLE_SLACK),
    recoveries: recoveries(h),
    staleOperations: staleOperations(h),
    handoffs: handoffs(h),
    faults: faultCounts(h),
  };
}

/**
 * Keeps the history as JSON lines in the temp directory when the test failed (always with
 * FAULTS_KEEP=1). Call it from afterEach, before closing the rig.
 */
export function keepHistory(rig: FaultRig | undefined, name: string, failed: boolean): void {
  if (!rig || (!failed && !process.env.FAULTS_KEEP)) return;
  const path = join(tmpdir(), `latchkey-faults-${name.replace(/\W+/g, '-').slice(0, 60)}-${process.pid}.jsonl`);
  rig.history.dump(path);
  console.error(`fault history kept in ${path}`);
}

/**
 * The end of a short-tier test: its history kept when it failed (or with FAULTS_KEEP=1), then the
 * rig closed. `afterEach((ctx) => endTest(rig, ctx).then(() => (rig = undefined)))`.
 */
export async function endTest(
  rig: FaultRig | undefined,
  ctx: { readonly task: { readonly name: string; readonly result?: { readonly state?: string } } },
): Promise<void> {
  keepHistory(rig, ctx.task.name, ctx.task.result?.state === 'fail');
  await rig?.close();
}

/** A filter on the history: events of worker `p` named `ev` (and matching `extra`). */
export const eventOf =
  (p: string, ev: string, extra: (e: HistoryEvent) => boolean = () => true) =>
  (e: HistoryEvent): boolean =>
    e.p === p && e.ev === ev && extra(e);
