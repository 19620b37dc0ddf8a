/**
 * Runs one plan of waiter-plan.ts against a backend and says what went wrong, as a list of
 * violations (empty: the run kept every property):
 * - mutual exclusion: at most one live lease per lock (`limit` per semaphore) whenever a lease is
 *   granted, a lease being live from its grant until the test releases it, closes its manager,
 *   or its validity runs out; fences strictly increasing per lock in grant order;
 * - every call settles, with an outcome its call allows (a lease, `null` for a try, a
 *   LockTimeoutError (UnreachableError in a run that stalled the server), the abort's own reason, LockAbortedError once its manager is closed,
 *   ClosedError for a call made after), within its wait (or abort, or close) plus a grace;
 * - whenever every call so far has settled (a `quiesce` step, the end of the steps): nobody is
 *   queued in the backend, and a lock is held only while a caller of the run holds a live lease
 *   on it (none granted to a waiter that is gone);
 * - once every manager is closed: the locks free, the semaphore's permits all free, and on Redis
 *   no key under the run's prefix but fence counters and the semaphore's permit count;
 * - then no more timers than before the run (`process.getActiveResourcesInfo()`) and, on Redis,
 *   no subscriber left (`PUBSUB CHANNELS <prefix>inbox:*`, `CLIENT LIST TYPE pubsub`).
 * The backend's clean-up after a give-up is asynchronous: the state is polled for a bounded time
 * (the backend's `cleanupMs`, plus the run's stalls) after everything settled, and only what is
 * still there then is reported.
 */
import type { Redis } from 'ioredis';
import {
  ClosedError,
  LeaseLostError,
  LeaseReleasedError,
  LockAbortedError,
  LockTimeoutError,
  UnreachableError,
  type Lease,
  type Locks,
  type Semaphore,
} from '../../src/index.js';
import type { BackendHarness } from './harness.js';
import { uniquePrefix } from './harness.js';
import type { AbortAt, Plan, Step } from './waiter-plan.js';

/** Where a run happens: a fresh harness per run; on Redis, raw connections to inspect and to stall the server. */
export interface RunBackend {
  readonly name: string;
  harness(): Promise<BackendHarness>;
  readonly redis?: { readonly raw: Redis; readonly stall: Redis } | undefined;
  /**
   * How long the backend may take to clean up (leave queues, release, unsubscribe) once every
   * call settled, ms: a few round trips to Redis on a loaded machine; in memory, promise jobs.
   */
  readonly cleanupMs: number;
}

/** How late past its wait (or abort, or close) a call may settle: one attempt in flight (250 ms) and a loaded machine. */
const GRACE_MS = 1000;
/** The semaphore every plan's `permit` steps share. */
const SEMAPHORE = 'sem';
/** The lock a warm plan's managers wait for before the steps (see {@link Plan.warm}). */
const WARM = 'warm';

/** The reason a planned abort gives: a rejection must be this very object. */
class PlannedAbort extends Error {
  constructor(label: string) {
    super(`planned abort of ${label}`);
    this.name = 'PlannedAbort';
  }
}

interface Call {
  readonly label: string;
  readonly m: number;
  /** The lock's name, or SEMAPHORE. */
  readonly resource: string;
  /** How many leases of the resource may be live at once. */
  readonly limit: number;
  readonly once: boolean;
  readonly wait: number;
  readonly started: number;
  /** Made after its manager was closed. */
  readonly afterClose: boolean;
  reason?: PlannedAbort;
  abortedAt?: number;
  settledAt?: number;
}

interface Held {
  readonly call: Call;
  readonly lease: Lease;
  /** The test released it (or closed its manager, which releases it). */
  released: boolean;
}

const delay = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Whether `promise` settles within `ms` (its outcome is someone else's to look at). */
async function within(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), Math.max(0, ms))));
  const settled = promise.then(
    () => true as const,
    () => true as const,
  );
  try {
    return await Promise.race([settled, expired]);
  } finally {
    clearTimeout(timer);
  }
}

/** Polls `look` (what is wrong now) until it finds nothing or `ms` ran out; what it found last. */
async function pollUntilClean(look: () => Promise<string[]>, ms: number): Promise<string[]> {
  const end = performance.now() + ms;
  for (;;) {
    const found = await look();
    if (found.length === 0 || performance.now() >= end) return found;
    await delay(20);
  }
}

const timeouts = (): number => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;

function describeError(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

function abortText(abort: AbortAt): string {
  return abort.at === 'never' ? '' : abort.at === 'ms' ? `, abort after ${abort.ms} ms` : `, abort ${abort.at}`;
}

export async function runPlan(backend: RunBackend, plan: Plan): Promise<string[]> {
  const prefix = uniquePrefix();
  const redis = backend.redis;
  const timersBefore = timeouts();
  const subscribersBefore = redis ? await pubsubClients(redis.raw) : 0;
  const h = await backend.harness();
  try {
    return await new Run(plan, h, prefix, backend).run(timersBefore, subscribersBefore);
  } finally {
    await h.close();
  }
}

async function pubsubClients(raw: Redis): Promise<number> {
  const list = String(await raw.call('CLIENT', 'LIST', 'TYPE', 'pubsub'));
  return list.split('\n').filter((line) => line.trim() !== '').length;
}

class Run {
  readonly #plan: Plan;
  readonly #h: BackendHarness;
  readonly #prefix: string;
  readonly #backend: RunBackend;
  readonly #redis: RunBackend['redis'];
  readonly #locks: Locks[];
  readonly #semaphores: Semaphore[];
  /** Inspects the backend at the end; never takes part in the run. */
  readonly #checker: Locks;
  readonly #closedAt: (number | undefined)[];
  readonly #calls: Call[] = [];
  readonly #held: Held[] = [];
  readonly #lastFence = new Map<string, number>();
  /** Every fence granted, per resource (fences are per lock: two locks may issue the same one). */
  readonly #fences = new Map<string, Set<number>>();
  /** The calls' outcomes, recorded as they settle. */
  readonly #settling: Promise<void>[] = [];
  /** Releases, extends, closes and stalls started by the steps. */
  readonly #ops: Promise<void>[] = [];
  readonly #timers = new Set<NodeJS.Timeout>();
  /** Calls already reported as never settled. */
  readonly #unsettled = new Set<Call>();
  readonly #violations: string[] = [];
  /** The stalls' total, ms: every call may be that much later. */
  readonly #stallMs: number;

  constructor(plan: Plan, h: BackendHarness, prefix: string, backend: RunBackend) {
    this.#plan = plan;
    this.#h = h;
    this.#prefix = prefix;
    this.#backend = backend;
    this.#redis = backend.redis;
    const settings = { prefix, recheck: plan.recheck, localHandoffs: plan.localHandoffs };
    this.#locks = Array.from({ length: plan.managers }, () => h.locks(settings));
    this.#semaphores = this.#locks.map((locks) => locks.semaphore(SEMAPHORE, { limit: plan.semLimit }));
    this.#checker = h.locks({ prefix, holder: false }); // registers nothing: it is still open when the keys are checked
    this.#closedAt = this.#locks.map(() => undefined);
    this.#stallMs = plan.steps.reduce((sum, step) => sum + (step.op === 'stall' ? step.ms : 0), 0);
  }

  /**
   * The steps, then the checks. The first violation ends the run at the next quiesce (the end of
   * the steps at the latest): it is what fast-check shrinks on, and later checks would only cost
   * time. The managers are closed whatever happened.
   */
  async run(timersBefore: number, subscribersBefore: number): Promise<string[]> {
    if (this.#plan.warm) await this.#warmUp();
    for (const [index, step] of this.#plan.steps.entries()) {
      if (step.op === 'pause') await delay(step.ms);
      else if (step.op === 'tick') await Promise.resolve();
      else if (step.op === 'quiesce') {
        await this.#quiesce(`at #${index} (quiesce)`);
        if (this.#violations.length > 0) break;
      } else this.#start(index, step);
    }
    if (this.#violations.length === 0) await this.#quiesce('after the last step');
    else await this.#settle('after the last step');
    await this.#closeAll();
    if (this.#violations.length === 0) await this.#checkStrays('after closing every manager', true);
    await this.#checker.close();
    if (this.#violations.length === 0) await this.#checkResources(timersBefore, subscribersBefore);
    return this.#violations;
  }

  /**
   * Each manager waits for a lock the checker holds, until its wait runs out: its inbox opens
   * meanwhile. On Redis, the steps start once every inbox listens, or after 2 s (a plan that
   * starts colder is weaker, not wrong: nothing is reported).
   */
  async #warmUp(): Promise<void> {
    const hold = await this.#checker.acquire(WARM, { ttl: 5000 });
    await Promise.all(
      this.#locks.map((locks, m) =>
        locks.acquire(WARM, { wait: 60 }).then(
          (lease) => this.#violation(`warm-up: m${m} was granted ${WARM} (fence ${lease.fence}) while the checker held it`),
          (error: unknown) => {
            if (!(error instanceof LockTimeoutError)) this.#violation(`warm-up: m${m}'s wait rejected with ${describeError(error)}`);
          },
        ),
      ),
    );
    await hold.release();
    const raw = this.#redis?.raw;
    if (!raw) return;
    await pollUntilClean(async () => {
      const channels = (await raw.call('PUBSUB', 'CHANNELS', `${this.#prefix}inbox:*`)) as string[];
      return channels.length < this.#plan.managers ? ['not all inboxes listen yet'] : [];
    }, 2000);
  }

  #violation(text: string): void {
    this.#violations.push(text);
  }

  #start(index: number, step: Exclude<Step, { op: 'pause' | 'tick' | 'quiesce' }>): void {
    const plan = this.#plan;
    switch (step.op) {
      case 'acquire': {
        const m = step.m;
        const key = `k${step.key}`;
        const { wait, ttl, renew, strategy } = step;
        const label = `#${index} m${m}.acquire(${key}, wait ${wait}, ttl ${ttl}${renew ? ', renew' : ''}, ${strategy}${abortText(step.abort)})`;
        this.#call({ label, m, resource: key, limit: 1, once: false, wait }, step.abort, (signal) =>
          this.#locks[m]!.acquire(key, { wait, ttl, renew, strategy, ...(signal ? { signal } : {}) }),
        );
        return;
      }
      case 'contend': {
        const key = `k${step.key}`;
        const { wait, ttl, strategy } = step;
        for (const [m, abort] of step.aborts.entries()) {
          const label = `#${index} m${m}.acquire(${key}, wait ${wait}, ttl ${ttl}, ${strategy}${abortText(abort)}) contending`;
          this.#call({ label, m, resource: key, limit: 1, once: false, wait }, abort, (signal) =>
            this.#locks[m]!.acquire(key, { wait, ttl, strategy, ...(signal ? { signal } : {}) }),
          );
        }
        return;
      }
      case 'tryAcquire': {
        const m = step.m;
        const key = `k${step.key}`;
        const label = `#${index} m${m}.tryAcquire(${key}, ttl ${step.ttl}${abortText(step.abort)})`;
        this.#call({ label, m, resource: key, limit: 1, once: true, wait: 0 }, step.abort, (signal) =>
          this.#locks[m]!.tryAcquire(key, { ttl: step.ttl, ...(signal ? { signal } : {}) }),
        );
        return;
      }
      case 'permit': {
        const m = step.m;
        const sem = this.#semaphores[m]!;
        const label = `#${index} m${m}.semaphore(limit ${plan.semLimit}).${step.once ? 'tryAcquire(' : `acquire(wait ${step.wait}, `}ttl ${step.ttl}${abortText(step.abort)})`;
        const wait = step.once ? 0 : step.wait;
        this.#call({ label, m, resource: SEMAPHORE, limit: plan.semLimit, once: step.once, wait }, step.abort, (signal) => {
          const options = { ttl: step.ttl, ...(signal ? { signal } : {}) };
          return step.once ? sem.tryAcquire(options) : sem.acquire({ ...options, wait });
        });
        return;
      }
      case 'release':
      case 'extend': {
        const live = this.#held.filter((held) => !held.released);
        const held = live[step.pick % Math.max(1, live.length)];
        if (!held) return;
        const what = `#${index} ${step.op} of ${held.call.label}'s lease (fence ${held.lease.fence})`;
        if (step.op === 'release') {
          held.released = true;
          this.#ops.push(held.lease.release().then(undefined, (error: unknown) => this.#leaseError(what, error, false)));
        } else {
          this.#ops.push(held.lease.extend().then(undefined, (error: unknown) => this.#leaseError(what, error, true)));
        }
        return;
      }
      case 'close': {
        const m = step.m;
        if (this.#closedAt[m] === undefined) this.#close(m, `#${index} m${m}.close()`);
        return;
      }
      case 'stall': {
        const stall = this.#redis?.stall;
        if (!stall) return;
        this.#ops.push(
          stall.call('DEBUG', 'SLEEP', (step.ms / 1000).toFixed(3)).then(
            () => undefined,
            (error: unknown) => this.#violation(`#${index} DEBUG SLEEP failed: ${describeError(error)}`),
          ),
        );
        return;
      }
    }
  }

  #call(
    given: Omit<Call, 'started' | 'afterClose'>,
    abort: AbortAt,
    start: (signal: AbortSignal | undefined) => Promise<Lease | null>,
  ): void {
    const controller = abort.at === 'never' ? undefined : new AbortController();
    const call: Call = { ...given, started: performance.now(), afterClose: this.#closedAt[given.m] !== undefined };
    this.#calls.push(call);
    let promise: Promise<Lease | null>;
    try {
      promise = start(controller?.signal);
    } catch (error) {
      promise = Promise.reject(error);
    }
    this.#settling.push(
      promise.then(
        (value) => this.#resolved(call, value),
        (error: unknown) => this.#rejected(call, error),
      ),
    );
    if (!controller) return;
    const fire = (): void => {
      if (call.settledAt === undefined) call.abortedAt = performance.now();
      call.reason = new PlannedAbort(call.label);
      controller.abort(call.reason);
    };
    if (abort.at === 'sync') fire();
    else if (abort.at === 'microtask') queueMicrotask(fire);
    else if (abort.at === 'ms') {
      const timer = setTimeout(() => {
        this.#timers.delete(timer);
        fire();
      }, abort.ms);
      this.#timers.add(timer);
    }
  }

  #resolved(call: Call, value: Lease | null): void {
    this.#settledAt(call);
    if (value === null) {
      if (!call.once) this.#violation(`${call.label} resolved to null: only a try may`);
      return;
    }
    const now = performance.now();
    const live = this.#held.filter((held) => held.call.resource === call.resource && !held.released && held.lease.validUntil > now);
    if (live.length >= call.limit) {
      const holders = live.map((held) => `${held.call.label} (fence ${held.lease.fence}, valid ${Math.round(held.lease.validUntil - now)} ms more)`);
      this.#violation(`mutual exclusion: ${call.label} was granted ${call.resource} (fence ${value.fence}) while ${holders.join(' and ')} held it`);
    }
    if (call.limit === 1) {
      const last = this.#lastFence.get(call.resource);
      if (last !== undefined && value.fence <= last) this.#violation(`fence order: ${call.label} got fence ${value.fence}, not above the last grant's ${last}`);
      this.#lastFence.set(call.resource, Math.max(last ?? 0, value.fence));
    }
    const fences = this.#fences.get(call.resource) ?? new Set<number>();
    if (fences.has(value.fence)) this.#violation(`fence ${value.fence} of ${call.label} was issued twice for ${call.resource}`);
    this.#fences.set(call.resource, fences.add(value.fence));
    // A lease that comes after its manager was closed is released by the manager itself.
    this.#held.push({ call, lease: value, released: this.#closedAt[call.m] !== undefined });
  }

  #rejected(call: Call, error: unknown): void {
    this.#settledAt(call);
    if (call.reason !== undefined && error === call.reason && call.abortedAt !== undefined) return;
    if (error instanceof LockTimeoutError && !call.once) return;
    // A call none of whose attempts got a reply while the server was stalled: Redis did not answer (issue 18).
    if (error instanceof UnreachableError && this.#stallMs > 0) return;
    if (error instanceof ClosedError && call.afterClose) return;
    if (error instanceof LockAbortedError && this.#closedAt[call.m] !== undefined) return;
    this.#violation(`${call.label} rejected with ${describeError(error)}${call.reason && error !== call.reason ? ' (not its abort reason)' : ''}`);
  }

  #settledAt(call: Call): void {
    const at = performance.now();
    call.settledAt = at;
    const late = at - this.#dueBy(call);
    if (late > GRACE_MS + this.#stallMs) this.#violation(`${call.label} settled ${Math.round(late)} ms after it was due`);
  }

  /** When a call should have settled, grace aside: at its wait's end, its abort, or its manager's close, whichever came first. */
  #dueBy(call: Call): number {
    const closed = this.#closedAt[call.m] ?? Infinity;
    return Math.min(call.started + call.wait, call.abortedAt ?? Infinity, Math.max(closed, call.started));
  }

  #leaseError(what: string, error: unknown, extend: boolean): void {
    if (error instanceof LeaseLostError) return;
    if (extend && error instanceof LeaseReleasedError) return;
    this.#violation(`${what} rejected with ${describeError(error)}`);
  }

  #close(m: number, label: string): void {
    this.#closedAt[m] = performance.now();
    for (const held of this.#held) if (held.call.m === m) held.released = true;
    this.#ops.push(this.#locks[m]!.close().then(undefined, (error: unknown) => this.#violation(`${label} rejected with ${describeError(error)}`)));
  }

  /** Waits for every call (bounded: past its due time and grace it is reported as never settled), then for the steps' operations. */
  async #settle(where: string): Promise<void> {
    const latest = Math.max(performance.now(), ...this.#calls.map((call) => this.#dueBy(call)));
    const bound = latest + GRACE_MS + this.#stallMs + 1000 - performance.now();
    if (!(await within(Promise.all(this.#settling), bound))) {
      for (const call of this.#calls) {
        if (call.settledAt !== undefined || this.#unsettled.has(call)) continue;
        this.#unsettled.add(call);
        this.#violation(`${call.label} never settled (${Math.round(performance.now() - call.started)} ms after the call)`);
      }
    }
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
    if (!(await within(Promise.all(this.#ops), 3000 + this.#stallMs))) this.#violation(`${where}: a release, extend or close never settled`);
  }

  /** Once every call so far has settled, the backend must hold nothing for callers that are gone. */
  async #quiesce(where: string): Promise<void> {
    await this.#settle(where);
    await this.#checkStrays(where, false);
  }

  async #closeAll(): Promise<void> {
    for (const m of this.#locks.keys()) if (this.#closedAt[m] === undefined) this.#close(m, `m${m}.close() at the end`);
    if (!(await within(Promise.all(this.#ops), 3000))) this.#violation('closing the managers did not finish within 3 s');
    // Calls that were left hanging are released by the close: they must settle now.
    await within(Promise.all(this.#settling), 1000);
  }

  /**
   * What the backend holds for callers that are gone, polled while clean-up may be in flight.
   * `final`: every manager is closed; the semaphore and, on Redis, the keys are looked at too.
   */
  async #checkStrays(where: string, final: boolean): Promise<void> {
    const bound = this.#backend.cleanupMs + this.#stallMs;
    const left = await pollUntilClean(() => this.#strays(final), bound);
    for (const text of left) this.#violation(`${where}, ${bound} ms after every call had settled: ${text}`);
  }

  async #strays(final: boolean): Promise<string[]> {
    const found: string[] = [];
    const keys = Array.from({ length: this.#plan.keys }, (_, i) => `k${i}`);
    if (this.#plan.warm) keys.push(WARM);
    const now = performance.now();
    for (const key of keys) {
      const queued = await this.#h.queued(this.#prefix, key);
      if (queued > 0) found.push(`${queued} waiter(s) queued for lock ${key}, no call waiting`);
      const info = await this.#checker.inspect(key);
      // A lease's validity counts from when its request was sent: a stalled server keeps the key that much longer.
      const holders = this.#held.filter((held) => held.call.resource === key && !held.released && held.lease.validUntil + this.#stallMs > now);
      if (info.held && holders.length === 0) found.push(`lock ${key} held (${info.ttl} ms to live), by no caller of the run`);
    }
    const semQueued = await this.#h.semaphoreQueued(this.#prefix, SEMAPHORE);
    if (semQueued > 0) found.push(`${semQueued} waiter(s) queued for the semaphore, no call waiting`);
    if (!final) return found;
    const all = await this.#checker.semaphore(SEMAPHORE, { limit: this.#plan.semLimit }).tryAcquire({ permits: this.#plan.semLimit, ttl: 1000 });
    if (all) await all.release();
    else found.push(`the semaphore's ${this.#plan.semLimit} permit(s) are not all free`);
    if (this.#redis) found.push(...(await this.#redisLeftovers(this.#redis.raw)));
    return found;
  }

  /** Keys under the run's prefix other than fence counters and the semaphore's holders and count (checked above by taking every permit). */
  async #redisLeftovers(raw: Redis): Promise<string[]> {
    const found: string[] = [];
    const semaphore = `${this.#prefix}{${SEMAPHORE}}:sem`;
    for (const key of await raw.keys(`${this.#prefix}*`)) {
      if (key.endsWith(':fence') || key === semaphore || key === `${semaphore}:permits`) continue;
      const [type, ttl] = await Promise.all([raw.type(key), raw.pttl(key)]);
      const size = type === 'zset' ? ` of ${await raw.zcard(key)}` : type === 'hash' ? ` of ${await raw.hlen(key)}` : '';
      found.push(`key ${key.slice(this.#prefix.length)} left (${type}${size}, ${ttl} ms to live)`);
    }
    return found;
  }

  /** Timers and subscriptions: polled too (a subscriber's connection closes after its QUIT is answered). */
  async #checkResources(timersBefore: number, subscribersBefore: number): Promise<void> {
    const redis = this.#redis;
    const left = await pollUntilClean(async () => {
      const found: string[] = [];
      const timers = timeouts();
      if (timers > timersBefore) found.push(`${timers - timersBefore} more timer(s) active than before the run (${timers}, was ${timersBefore})`);
      if (redis) {
        const channels = (await redis.raw.call('PUBSUB', 'CHANNELS', `${this.#prefix}inbox:*`)) as string[];
        if (channels.length > 0) found.push(`${channels.length} inbox channel(s) still subscribed: ${channels.join(', ')}`);
        const subscribers = await pubsubClients(redis.raw);
        if (subscribers > subscribersBefore) found.push(`${subscribers - subscribersBefore} more pub/sub connection(s) than before the run`);
      }
      return found;
    }, this.#backend.cleanupMs);
    for (const text of left) this.#violation(`after closing every manager: ${text}`);
  }
}
