/**
 * The watchdogs of one manager waiting for their next renewal, in the order due. Nearly every
 * renewal is scheduled one interval (`every`) after the last: those go in a first-in first-out
 * lane per interval, in the order due by construction (due = now + every, and the clock only goes
 * forward), so taking and adding one costs O(1) whatever the number of leases. The rest (retries
 * after a failed renewal, sooner than `every`) go in a binary min-heap on `due`.
 */

/** What the queue needs of a watchdog: when it is due, its interval, and where the queue keeps it. */
export interface Queued {
  readonly due: number;
  readonly every: number;
  /** Where it is: its heap index, {@link IN_LANE}, or {@link NOT_QUEUED}. Owned by the queue. */
  slot: number;
  /** Bumped each time it enters a lane: a lane entry with another number is stale (taken out since). Owned by the queue. */
  seq: number;
}

/** `slot` of a watchdog in no lane nor heap. */
export const NOT_QUEUED = -1;
/** `slot` of a watchdog in its interval's lane. */
export const IN_LANE = -2;

/** One interval's lane: entries from `head` on, each with the `seq` it entered with. */
interface Lane<W extends Queued> {
  items: W[];
  seqs: number[];
  head: number;
}

export class RenewalQueue<W extends Queued> {
  readonly #lanes = new Map<number, Lane<W>>();
  readonly #heap: W[] = [];

  /** Queues `w` at its `due`; `regular`: due one interval after now (its lane), else the heap. */
  add(w: W, regular: boolean): void {
    this.remove(w);
    if (regular) {
      let lane = this.#lanes.get(w.every);
      if (!lane) this.#lanes.set(w.every, (lane = { items: [], seqs: [], head: 0 }));
      w.slot = IN_LANE;
      lane.items.push(w);
      lane.seqs.push(++w.seq);
      return;
    }
    w.slot = this.#heap.length;
    this.#heap.push(w);
    this.#up(w.slot);
  }

  /** Takes `w` out; nothing when it is not queued (a lane entry is left behind, stale, and skipped). */
  remove(w: W): void {
    const i = w.slot;
    w.slot = NOT_QUEUED;
    if (i < 0) return;
    const last = this.#heap.pop()!;
    if (last === w) return;
    this.#heap[i] = last;
    last.slot = i;
    this.#down(i);
    this.#up(last.slot);
  }

  /** When the earliest queued watchdog is due; Infinity when none is. */
  earliest(): number {
    let at = this.#heap.length > 0 ? this.#heap[0]!.due : Infinity;
    for (const lane of this.#lanes.values()) {
      const first = this.#front(lane);
      if (first && first.due < at) at = first.due;
    }
    return at;
  }

  /**
   * Takes out every watchdog due by `t + window(w)` and gives it to `take`. A lane or the heap is
   * read in the order due: a watchdog with a wider window behind one that is not taken waits for
   * a later round (never past its own due time, when the timer is armed for the earliest).
   */
  takeDue(t: number, window: (w: W) => number, take: (w: W) => void): void {
    for (const [every, lane] of this.#lanes) {
      for (let first = this.#front(lane); first && first.due - window(first) <= t; first = this.#front(lane)) {
        lane.head++;
        first.slot = NOT_QUEUED;
        take(first);
      }
      this.#compact(every, lane);
    }
    const heap = this.#heap;
    while (heap.length > 0 && heap[0]!.due - window(heap[0]!) <= t) {
      const w = heap[0]!;
      this.remove(w);
      take(w);
    }
  }

  /** The lane's first live entry, past the stale ones (which it drops). */
  #front(lane: Lane<W>): W | undefined {
    while (lane.head < lane.items.length) {
      const w = lane.items[lane.head]!;
      if (w.slot === IN_LANE && w.seq === lane.seqs[lane.head]) return w;
      lane.head++;
    }
    return undefined;
  }

  /** Drops the entries before `head` once they are half the lane (an empty lane goes). */
  #compact(every: number, lane: Lane<W>): void {
    if (lane.head === lane.items.length) {
      this.#lanes.delete(every);
      return;
    }
    if (lane.head < 1024 || lane.head * 2 < lane.items.length) return;
    lane.items = lane.items.slice(lane.head);
    lane.seqs = lane.seqs.slice(lane.head);
    lane.head = 0;
  }

  #up(i: number): void {
    const heap = this.#heap;
    const w = heap[i]!;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const p = heap[parent]!;
      if (p.due <= w.due) break;
      heap[i] = p;
      p.slot = i;
      i = parent;
    }
    heap[i] = w;
    w.slot = i;
  }

  #down(i: number): void {
    const heap = this.#heap;
    const n = heap.length;
    const w = heap[i]!;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= n) break;
      const right = left + 1;
      const child = right < n && heap[right]!.due < heap[left]!.due ? right : left;
      const c = heap[child]!;
      if (c.due >= w.due) break;
      heap[i] = c;
      c.slot = i;
      i = child;
    }
    heap[i] = w;
    w.slot = i;
  }
}
