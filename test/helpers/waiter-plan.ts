/**
 * Random schedules of lock calls for the waiter property test (test/integration/waiter-properties.test.ts):
 * what a run does, as plain data that fast-check generates, shrinks and prints. Executed by
 * waiter-run.ts.
 */
import fc from 'fast-check';

/** When a call's signal aborts: never, right after the call returns, after one microtask, or after `ms`. */
export type AbortAt = { readonly at: 'never' } | { readonly at: 'sync' } | { readonly at: 'microtask' } | { readonly at: 'ms'; readonly ms: number };

/**
 * One step. Calls are started and not awaited (their outcomes are checked when they settle), so
 * consecutive steps run in the same tick; `pause`, `tick` and `quiesce` let time pass between
 * them. `m` and `key` index the run's managers and keys (`k0`, `k1`); `pick` chooses among the
 * leases not yet released, in the order they were granted (modulo their number).
 */
export type Step =
  | {
      readonly op: 'acquire';
      readonly m: number;
      readonly key: number;
      readonly wait: number;
      readonly ttl: number;
      readonly renew: boolean;
      readonly strategy: 'notify' | 'backoff';
      readonly abort: AbortAt;
    }
  /** Contention: every manager acquires the lock in the same tick, the m-th with `aborts[m]`. */
  | {
      readonly op: 'contend';
      readonly key: number;
      readonly wait: number;
      readonly ttl: number;
      readonly strategy: 'notify' | 'backoff';
      readonly aborts: readonly AbortAt[];
    }
  | { readonly op: 'tryAcquire'; readonly m: number; readonly key: number; readonly ttl: number; readonly abort: AbortAt }
  /** A permit of the run's semaphore: `acquire`, or `tryAcquire` when `once`. */
  | { readonly op: 'permit'; readonly m: number; readonly once: boolean; readonly wait: number; readonly ttl: number; readonly abort: AbortAt }
  | { readonly op: 'release'; readonly pick: number }
  | { readonly op: 'extend'; readonly pick: number }
  | { readonly op: 'close'; readonly m: number }
  | { readonly op: 'pause'; readonly ms: number }
  | { readonly op: 'tick' }
  /** Waits until every call so far has settled, then checks that the backend holds nothing for callers that are gone. */
  | { readonly op: 'quiesce' }
  /** Redis only: `DEBUG SLEEP` from a raw connection, so that attempts in flight outlive their deadline. */
  | { readonly op: 'stall'; readonly ms: number };

export interface Plan {
  /** How many managers share the backend (2 or 3). */
  readonly managers: number;
  /** How many lock names the steps use (1 or 2). */
  readonly keys: number;
  /**
   * The managers' `recheck`, ms. A queue entry lives 3 rechecks, the queue key 6 since the last
   * attempt that queued: a leaked entry shows that long, longer than the checks' clean-up bound.
   */
  readonly recheck: number;
  readonly localHandoffs: number;
  /** The semaphore's limit. */
  readonly semLimit: number;
  /**
   * Whether each manager has waited once before the steps (for a lock that is not one of the
   * steps'), as a manager that has been running a while has: its inbox is then open, and its
   * waiters queue in the backend from their first attempt.
   */
  readonly warm: boolean;
  readonly steps: readonly Step[];
}

const abortAt: fc.Arbitrary<AbortAt> = fc.oneof(
  { weight: 4, arbitrary: fc.constant({ at: 'never' } as const) },
  { weight: 3, arbitrary: fc.constant({ at: 'sync' } as const) },
  { weight: 3, arbitrary: fc.constant({ at: 'microtask' } as const) },
  { weight: 2, arbitrary: fc.integer({ min: 0, max: 150 }).map((ms) => ({ at: 'ms', ms }) as const) },
);

// Long TTLs mostly, and shrinking goes towards them: a lock granted to a waiter that is gone is
// held until its TTL runs out, so a short one would end such a leak before the checks see it.
const ttl = fc.oneof({ weight: 3, arbitrary: fc.constant(3000) }, { weight: 2, arbitrary: fc.constant(1000) }, { weight: 1, arbitrary: fc.constant(200) });
const wait = fc.integer({ min: 20, max: 200 });
const manager = fc.nat(2);
const strategy = fc.oneof({ weight: 3, arbitrary: fc.constant('notify' as const) }, { weight: 1, arbitrary: fc.constant('backoff' as const) });

function step(stalls: boolean): fc.Arbitrary<Step> {
  const steps: fc.WeightedArbitrary<Step>[] = [
    {
      weight: 8,
      arbitrary: fc.record({
        op: fc.constant('acquire' as const),
        m: manager,
        key: fc.nat(1),
        wait,
        ttl,
        renew: fc.boolean(),
        strategy,
        abort: abortAt,
      }),
    },
    {
      weight: 3,
      arbitrary: fc.record({ op: fc.constant('contend' as const), key: fc.nat(1), wait, ttl, strategy, aborts: fc.array(abortAt, { minLength: 3, maxLength: 3 }) }),
    },
    { weight: 1, arbitrary: fc.record({ op: fc.constant('tryAcquire' as const), m: manager, key: fc.nat(1), ttl, abort: abortAt }) },
    { weight: 2, arbitrary: fc.record({ op: fc.constant('permit' as const), m: manager, once: fc.boolean(), wait, ttl, abort: abortAt }) },
    { weight: 2, arbitrary: fc.record({ op: fc.constant('release' as const), pick: fc.nat(3) }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant('extend' as const), pick: fc.nat(3) }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant('close' as const), m: manager }) },
    { weight: 3, arbitrary: fc.record({ op: fc.constant('pause' as const), ms: fc.integer({ min: 0, max: 150 }) }) },
    { weight: 1, arbitrary: fc.constant({ op: 'tick' } as const) },
    { weight: 2, arbitrary: fc.constant({ op: 'quiesce' } as const) },
  ];
  if (stalls) steps.push({ weight: 1, arbitrary: fc.record({ op: fc.constant('stall' as const), ms: fc.integer({ min: 100, max: 300 }) }) });
  return fc.oneof(...steps);
}

/** A run's plan; `stalls`: the backend is a Redis server that `DEBUG SLEEP` can stall. */
export function plans(stalls: boolean): fc.Arbitrary<Plan> {
  return fc
    .record({
      managers: fc.integer({ min: 2, max: 3 }),
      keys: fc.oneof({ weight: 2, arbitrary: fc.constant(1) }, { weight: 1, arbitrary: fc.constant(2) }),
      recheck: fc.constantFrom(400, 100, 60),
      localHandoffs: fc.constantFrom(8, 0),
      semLimit: fc.integer({ min: 1, max: 2 }),
      warm: fc.boolean(),
      steps: fc.array(step(stalls), { minLength: 1, maxLength: 20, size: 'medium' }),
    })
    .map((plan) => ({ ...plan, steps: plan.steps.map((s) => withinPlan(s, plan.managers, plan.keys)) }));
}

/** The step with its manager and key brought within the plan's (generated up to the most, so that shrinking the counts keeps the steps). */
function withinPlan(step: Step, managers: number, keys: number): Step {
  const m = 'm' in step ? { m: step.m % managers } : {};
  const key = 'key' in step ? { key: step.key % keys } : {};
  const aborts = 'aborts' in step ? { aborts: step.aborts.slice(0, managers) } : {};
  return { ...step, ...m, ...key, ...aborts };
}
