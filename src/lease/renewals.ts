/**
 * The renewals of a manager's leases, on one timer, batched. A timer and an extend script per
 * renewed lease cost Node a timer and a round trip per renewal, and Redis a script call each: at
 * 100,000 leases renewed every 3.3 s, 30,000 calls a second. Here the leases that are due at
 * about the same time are renewed together, in one extend-many.lua call per {@link MAX_BATCH}
 * leases, each with its own outcome.
 *
 * When: each lease's watchdog says when its next renewal is due; the timer is armed for the
 * earliest, and when it fires it renews every lease due within the next quarter of that lease's
 * interval (`every / 4`). A lease is so renewed up to `every / 4` early, never later than its own
 * schedule; renewed together, leases acquired close in time stay together at every renewal after.
 *
 * Outcomes: each lease takes its own reply (extended, gone, taken). A batch that fails is a
 * failed renewal of each of its leases (retried while validity remains, by the watchdog's rules).
 * A batch is not waited for past the validity of a lease it carries: that lease is then lost as
 * unreachable (its renewal reported), the others still wait, each until its own validity; a reply
 * that comes later only has a lease that counts as lost give back a key it extended.
 *
 * Backends without `extendMany` (Redlock, compat mode), a replica-acknowledged client (its
 * `extendMany` resolves to undefined) and semaphore permits are renewed one lease a call, on the
 * same timer. A Cluster client batches per slot (see cluster-batches.ts).
 */
import { MAX_BATCH, type Backend, type ExtendManyReply, type OwnershipReply } from '../backend/backend.js';
import { now } from '../clock.js';
import { Deadlines, type Deadline } from '../deadlines.js';
import { RenewalQueue } from './renewal-queue.js';
import type { Watchdog } from './watchdog.js';

/** How early a lease may be renewed to join a batch: this fraction of its renewal interval. */
const WINDOW = 1 / 4;
const windowOf = (w: Watchdog): number => w.every * WINDOW;

/** The deadlines of batches in flight: one entry per batch, at the earliest validity it still waits on. */
const inFlight = new Deadlines();

/** The scheduler of one manager's renewals (one per manager, in its lease context). */
export class Renewals {
  readonly #backend: Backend;
  readonly #touchHolder: (() => void) | undefined;
  /** The scheduled watchdogs, in the order due. */
  readonly #queue = new RenewalQueue<Watchdog>();
  #timer: NodeJS.Timeout | undefined;
  #timerAt = Infinity;
  /** False once the backend said it cannot batch (replica acknowledgement): every lease is then renewed alone. */
  #batching: boolean;

  /** `touchHolder`: keeps the manager's holder registration alive, once per batch (see HolderNames.touch). */
  constructor(backend: Backend, touchHolder?: () => void) {
    this.#backend = backend;
    this.#touchHolder = touchHolder;
    this.#batching = backend.extendMany !== undefined;
  }

  /** Schedules the watchdog's next renewal, at its `due` time; `regular`: one interval from now (see RenewalQueue). */
  add(w: Watchdog, regular: boolean): void {
    this.#queue.add(w, regular);
    if (w.due < this.#timerAt) this.#arm(w.due);
  }

  /** Takes the watchdog out (stopped); nothing when it is not scheduled. */
  remove(w: Watchdog): void {
    // The timer stays armed: when it fires early for nothing, it is armed again for the earliest.
    this.#queue.remove(w);
  }

  #arm(at: number): void {
    clearTimeout(this.#timer);
    this.#timerAt = at;
    // Timers fire on whole milliseconds: a renewal not yet due when it fires is looked at again 1 ms later.
    this.#timer = setTimeout(() => this.#fire(), Math.max(1, Math.ceil(at - now())));
    this.#timer.unref();
  }

  #fire(): void {
    this.#timer = undefined;
    this.#timerAt = Infinity;
    const t = now();
    const batch: Watchdog[] = [];
    // Everything due within its window (a quarter of its interval).
    this.#queue.takeDue(t, windowOf, (w) => {
      if (!w.begin(t)) return;
      if (this.#batching && w.keys.semaphore === undefined) batch.push(w);
      else w.renewAlone();
    });
    for (let start = 0; start < batch.length; start += MAX_BATCH) this.#send(batch.slice(start, start + MAX_BATCH));
    const next = this.#queue.earliest();
    if (next < Infinity) this.#arm(next);
  }

  /** One batch: one extendMany call, each lease taking its own reply; bounded by the leases' validity. */
  #send(batch: readonly Watchdog[]): void {
    const sentAt = now();
    this.#touchHolder?.();
    /** The leases whose renewal is still waited for. */
    const open = new Set(batch);
    /** Per lease, true once its reply was handled (a part of the batch that came first: a Cluster slot's). */
    const answered = new Array<boolean>(batch.length).fill(false);
    const take = (i: number, got: OwnershipReply | Error | undefined, at: number): void => {
      const w = batch[i]!;
      const reply = got ?? new Error('no reply for this lease');
      answered[i] = true;
      if (open.delete(w)) w.replied(sentAt, reply, at);
      // Settled when its validity ran out: only a key the batch extended is given back.
      else w.lease.renewed(sentAt, reply, true)?.catch(() => {});
    };
    let call: Promise<ExtendManyReply | undefined>;
    try {
      // Each watchdog is its lease's ExtendItem; a Cluster slot's replies are taken as they come.
      call = this.#backend.extendMany!(batch, (indices, replies) => {
        const at = now();
        indices.forEach((i, j) => take(i, replies[j], at));
      });
    } catch (error) {
      call = Promise.reject(error);
    }
    let deadline: Deadline | undefined;
    const watch = (): void => {
      let at = Infinity;
      for (const w of open) if (w.lease.validUntil < at) at = w.lease.validUntil;
      if (at === Infinity) return;
      deadline = { at, expire: expired };
      inFlight.watch(deadline);
    };
    // No reply by a lease's validity: it is settled then (lost as unreachable, and reported),
    // the others wait on, each until its own validity (another extend may have lengthened it).
    const expired = (at: number): void => {
      deadline = undefined;
      for (const w of open) {
        if (w.lease.validUntil > at) continue;
        open.delete(w);
        w.replied(sentAt, new Error('no reply within the validity'));
      }
      watch();
    };
    if (!this.#backend.boundsCalls) watch();
    call.then(
      (replies) => {
        if (deadline) inFlight.delete(deadline);
        if (!replies) {
          // The backend cannot batch here (replica acknowledgement): from now on, one lease a call.
          this.#batching = false;
          for (const w of open) w.renewAlone();
          return;
        }
        const at = now(); // once for the batch: its leases are handled in one go
        for (let i = 0; i < batch.length; i++) if (!answered[i]) take(i, replies[i], at);
      },
      (error: unknown) => {
        if (deadline) inFlight.delete(deadline);
        const failure = error instanceof Error ? error : new Error(String(error));
        for (const w of open) w.replied(sentAt, failure);
      },
    );
  }
}
