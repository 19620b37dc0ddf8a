import type { LockKeys } from '../keys.js';

/** How many locks' last fences a Redlock backend keeps as floors for their next acquire. */
const FENCES_KEPT = 1024;

/**
 * Per lock (its fence key), the highest fence a node issued to this backend for it: won or not,
 * on time or late. The next acquire offers one more as the floor (see acquire.lua). When this
 * backend took the lock last, that is each node's next fence (its counter + 1) and a node
 * writes its counter once; a node whose counter is behind (it missed acquires, or issued its
 * own clock to the lock's first acquire while a later straggler issued a higher one) is lifted
 * to it, so the counters come to agree without a raise. After another caller's acquires the
 * nodes issue their counter + 1. Every value here was issued by a node, so no clock of this
 * machine reaches a fence. Bounded: past FENCES_KEPT locks the oldest goes, and its next
 * acquire offers 0 (no floor).
 */
export class FenceFloors {
  readonly #seen = new Map<string, number>();

  /** The floor the next acquire of `keys` offers every node: the highest fence seen + 1, or 0. */
  floorFor(keys: LockKeys): number {
    const fence = this.#seen.get(keys.fence);
    return fence === undefined ? 0 : fence + 1;
  }

  /** A node issued `fence` for `keys`. */
  saw(keys: LockKeys, fence: number): void {
    const seen = this.#seen;
    const before = seen.get(keys.fence);
    if (before !== undefined && before >= fence) return;
    if (before === undefined && seen.size >= FENCES_KEPT) seen.delete(seen.keys().next().value!);
    seen.set(keys.fence, fence);
  }
}
