/**
 * Runs every checker over a rig's history and gives one summary a test can assert on; on a failed
 * assertion the test keeps the history as JSON lines (see `keepHistoryOnFailure`).
 */
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { onTestFailed } from 'vitest';
import {
  faultCounts,
  fenceOrderViolations,
  fencedWrites,
  grants,
  lostUpdates,
  overlaps,
  recoveries,
  unsettledAcquires,
  type Overlap,
  type Recovery,
  type Unsettled,
  type WriteReport,
} from './checkers.js';
import type { FaultRig } from './harness.js';

export interface Summary {
  readonly acquisitions: number;
  readonly overlaps: Overlap[];
  readonly fenceOrder: number;
  readonly writes: WriteReport;
  readonly lostUpdates: number;
  readonly unsettled: Unsettled[];
  readonly recoveries: Recovery[];
  readonly faults: Record<string, number>;
}

/** Slack over an acquire's own wait before it counts as hung (ms): a loaded 2-core machine. */
export const SETTLE_SLACK = 1_500;

export function summarize(rig: FaultRig): Summary {
  const h = rig.history.events;
  return {
    acquisitions: grants(h).length,
    overlaps: overlaps(h),
    fenceOrder: fenceOrderViolations(h).length,
    writes: fencedWrites(h),
    lostUpdates: lostUpdates(h),
    unsettled: unsettledAcquires(h, SETTLE_SLACK),
    recoveries: recoveries(h),
    faults: faultCounts(h),
  };
}

export function keepHistoryOnFailure(rig: () => FaultRig | undefined, name: string): void {
  onTestFailed(() => {
    const current = rig();
    if (!current) return;
    const path = join(tmpdir(), `latchkey-faults-${name.replace(/\W+/g, '-')}-${process.pid}.jsonl`);
    current.history.dump(path);
    console.error(`fault history kept in ${path}`);
  });
}
