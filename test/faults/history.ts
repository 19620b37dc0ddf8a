/**
 * The fault suite's history: every event of the harness and its workers, on the machine's monotonic
 * clock, in one list that tests wait on and the checkers read.
 */
import { writeFileSync } from 'node:fs';

/** One event: `t` is process.hrtime.bigint() in ns, `p` the process ('harness' for faults). */
export interface HistoryEvent {
  readonly t: bigint;
  readonly p: string;
  readonly ev: string;
  readonly n?: number;
  readonly fence?: number;
  readonly validUntil?: bigint;
  readonly wait?: number;
  readonly read?: number;
  readonly code?: string;
  readonly reason?: string;
  readonly kind?: string;
  readonly [field: string]: unknown;
}

type Waiter = { readonly match: (e: HistoryEvent) => boolean; readonly resolve: (e: HistoryEvent) => void };

export class History {
  readonly events: HistoryEvent[] = [];
  #waiters: Waiter[] = [];

  add(event: HistoryEvent): void {
    this.events.push(event);
    for (const waiter of this.#waiters.filter((w) => w.match(event))) {
      this.#waiters = this.#waiters.filter((w) => w !== waiter);
      waiter.resolve(event);
    }
  }

  /** Records a harness event (a fault, a kill) now. */
  note(ev: string, data: Record<string, unknown> = {}): HistoryEvent {
    const event: HistoryEvent = { t: process.hrtime.bigint(), p: 'harness', ev, ...data };
    this.add(event);
    return event;
  }

  /** The first event (already recorded or to come) that matches; rejects after `timeoutMs`. */
  waitFor(match: (e: HistoryEvent) => boolean, timeoutMs: number, what: string, after = 0n): Promise<HistoryEvent> {
    const found = this.events.find((e) => e.t >= after && match(e));
    if (found) return Promise.resolve(found);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiters = this.#waiters.filter((w) => w !== waiter);
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`));
      }, timeoutMs);
      const waiter: Waiter = {
        match: (e) => e.t >= after && match(e),
        resolve: (e) => {
          clearTimeout(timer);
          resolve(e);
        },
      };
      this.#waiters.push(waiter);
    });
  }

  /** The history as JSON lines (bigints as strings), to keep when a test fails. */
  dump(path: string): void {
    writeFileSync(path, this.events.map((e) => JSON.stringify(e, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v))).join('\n') + '\n');
  }
}
