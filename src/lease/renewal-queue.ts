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

/**
 * One interval's lane: a ring of entries, each with the `seq` it entered with, that doubles when
 * full and never shrinks (it goes when empty). A ring and not an array with a head index: at
 * 100,000 leases, the array's growth and compaction made a few MB of garbage every round.
 */
class Lane<W extends Queued> {
  #items: (W | undefined)[] = new Array<W | undefined>(16);
  #seqs: number[] = new Array<number>(16).fill(0);
  #head = 0;
  #size = 0;

  get empty(): boolean {
    return this.#size === 0;
  }

  push(w: W, seq: number): void {
    if (this.#size === this.#items.length) this.#grow();
    const i = (this.#head + this.#size) & (this.#items.length - 1);
    this.#items[i] = w;
    this.#seqs[i] = seq;
    this.#size++;
  }

  /** The first live entry, past the stale ones (which it drops). */
  front(): W | undefined {
    while (this.#size > 0) {
      const w = this.#items[this.#head]!;
      if (w.slot === IN_LANE && w.seq === this.#seqs[this.#head]) return w;
      this.shift();
    }
    return undefined;
  }

  /** Drops the first entry. */
  shift(): void {
    this.#items[this.#head] = undefined;
    this.#head = (this.#head + 1) & (this.#items.length - 1);
    this.#size--;
  }

  #grow(): void {
    const mask = this.#items.length - 1;
    const items = new Array<W | undefined>(this.#items.length * 2);
    const seqs = new Array<number>(this.#items.length * 2).fill(0);
    for (let k = 0; k < this.#size; k++) {
      items[k] = this.#items[(this.#head + k) & mask];
      seqs[k] = this.#seqs[(this.#head + k) & mask]!;
    }
    this.#items = items;
    this.#seqs = seqs;
    this.#head = 0;
  }
}

export class RenewalQueue<W extends Queued> {
  readonly #lanes = new Map<number, Lane<W>>();
  readonly #heap: W[] = [];

  /** Queues `w` at its `due`; `regular`: due one interval after now (its lane), else the heap. */
  add(w: W, regular: boolean): void {
    this.remove(w);
    if (regular) {
      let lane = this.#lanes.get(w.every);
      if (!lane) this.#lanes.set(w.every, (lane = new Lane<W>()));
      w.slot = IN_LANE;
      lane.push(w, ++w.seq);
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
      const first = lane.front();
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
      for (let first = lane.front(); first && first.due - window(first) <= t; first = lane.front()) {
        lane.shift();
        first.slot = NOT_QUEUED;
        take(first);
      }
      if (lane.empty) this.#lanes.delete(every);
    }
    const heap = this.#heap;
    while (heap.length > 0 && heap[0]!.due - window(heap[0]!) <= t) {
      const w = heap[0]!;
      this.remove(w);
      take(w);
    }
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
