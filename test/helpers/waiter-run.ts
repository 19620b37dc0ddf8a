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
 *
 * The run drives the steps here; what it records of its calls and leases is in
 * waiter-run-calls.ts, the checks on each call as it settles in waiter-run-outcomes.ts, and what
 * it finds left once they settled in waiter-run-leftovers.ts.
 */
import type { Redis } from 'ioredis';
import { LockTimeoutError, type Lease, type Locks, type Semaphore } from '../../src/index.js';
import type { BackendHarness } from './harness.js';
import { uniquePrefix } from './harness.js';
import { delay, describeError, GRACE_MS, PlannedAbort, SEMAPHORE, WARM, type Call } from './waiter-run-calls.js';
import { Leftovers, pollUntilClean, pubsubClients, timeouts } from './waiter-run-leftovers.js';
import { Outcomes } from './waiter-run-outcomes.js';
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

class Run {
  readonly #plan: Plan;
  readonly #prefix: string;
  readonly #redis: RunBackend['redis'];
  readonly #locks: Locks[];
  readonly #semaphores: Semaphore[];
  /** Inspects the backend at the end; never takes part in the run. */
  readonly #checker: Locks;
  readonly #closedAt: (number | undefined)[];
  readonly #calls: Call[] = [];
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
  /** The leases granted and the checks on each call as it settles. */
  readonly #outcomes: Outcomes;
  /** What is left once the calls settled. */
  readonly #leftovers: Leftovers;

  constructor(plan: Plan, h: BackendHarness, prefix: string, backend: RunBackend) {
    this.#plan = plan;
    this.#prefix = prefix;
    this.#redis = backend.redis;
    const settings = { prefix, recheck: plan.recheck, localHandoffs: plan.localHandoffs };
    this.#locks = Array.from({ length: plan.managers }, () => h.locks(settings));
    this.#semaphores = this.#locks.map((locks) => locks.semaphore(SEMAPHORE, { limit: plan.semLimit }));
    this.#checker = h.locks({ prefix, holder: false }); // registers nothing: it is still open when the keys are checked
    this.#closedAt = this.#locks.map(() => undefined);
    this.#stallMs = plan.steps.reduce((sum, step) => sum + (step.op === 'stall' ? step.ms : 0), 0);
    const violation = (text: string): void => this.#violation(text);
    this.#outcomes = new Outcomes(this.#closedAt, this.#stallMs, violation);
    this.#leftovers = new Leftovers({
      plan,
      h,
      prefix,
      checker: this.#checker,
      backend,
      redis: backend.redis,
      held: this.#outcomes.held,
      stallMs: this.#stallMs,
      violation,
    });
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
    if (this.#violations.length === 0) await this.#leftovers.checkStrays('after closing every manager', true);
    await this.#checker.close();
    if (this.#violations.length === 0) await this.#leftovers.checkResources(timersBefore, subscribersBefore);
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
        const live = this.#outcomes.held.filter((held) => !held.released);
        const held = live[step.pick % Math.max(1, live.length)];
        if (!held) return;
        const what = `#${index} ${step.op} of ${held.call.label}'s lease (fence ${held.lease.fence})`;
        if (step.op === 'release') {
          held.released = true;
          this.#ops.push(held.lease.release().then(undefined, (error: unknown) => this.#outcomes.leaseError(what, error, false)));
        } else {
          this.#ops.push(held.lease.extend().then(undefined, (error: unknown) => this.#outcomes.leaseError(what, error, true)));
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
        (value) => this.#outcomes.resolved(call, value),
        (error: unknown) => this.#outcomes.rejected(call, error),
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

  #close(m: number, label: string): void {
    this.#closedAt[m] = performance.now();
    for (const held of this.#outcomes.held) if (held.call.m === m) held.released = true;
    this.#ops.push(this.#locks[m]!.close().then(undefined, (error: unknown) => this.#violation(`${label} rejected with ${describeError(error)}`)));
  }

  /** Waits for every call (bounded: past its due time and grace it is reported as never settled), then for the steps' operations. */
  async #settle(where: string): Promise<void> {
    const latest = Math.max(performance.now(), ...this.#calls.map((call) => this.#outcomes.dueBy(call)));
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
    await this.#leftovers.checkStrays(where, false);
  }

  async #closeAll(): Promise<void> {
    for (const m of this.#locks.keys()) if (this.#closedAt[m] === undefined) this.#close(m, `m${m}.close() at the end`);
    if (!(await within(Promise.all(this.#ops), 3000))) this.#violation('closing the managers did not finish within 3 s');
    // Calls that were left hanging are released by the close: they must settle now.
    await within(Promise.all(this.#settling), 1000);
  }
}
