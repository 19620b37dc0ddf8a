/**
 * What a waiter run (waiter-run.ts) finds left once its calls settled: waiters queued for callers
 * that are gone, locks held by no caller of the run, and once every manager is closed, permits
 * not all free, keys under the run's prefix, timers and pub/sub subscribers. The state is polled
 * while clean-up may still be in flight, and only what is still there then is reported.
 */
import type { Redis } from 'ioredis';
import type { Locks } from '../../src/index.js';
import type { BackendHarness } from './harness.js';
import { delay, SEMAPHORE, WARM, type Held } from './waiter-run-calls.js';
import type { Plan } from './waiter-plan.js';

/** Polls `look` (what is wrong now) until it finds nothing or `ms` ran out; what it found last. */
export async function pollUntilClean(look: () => Promise<string[]>, ms: number): Promise<string[]> {
  const end = performance.now() + ms;
  for (;;) {
    const found = await look();
    if (found.length === 0 || performance.now() >= end) return found;
    await delay(20);
  }
}

export const timeouts = (): number => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;

export async function pubsubClients(raw: Redis): Promise<number> {
  const list = String(await raw.call('CLIENT', 'LIST', 'TYPE', 'pubsub'));
  return list.split('\n').filter((line) => line.trim() !== '').length;
}

/** What the checks read of a run: waiter-run.ts's Run passes its own. */
export interface LeftoversOf {
  readonly plan: Plan;
  readonly h: BackendHarness;
  readonly prefix: string;
  /** Inspects the backend; never takes part in the run. */
  readonly checker: Locks;
  readonly backend: { readonly cleanupMs: number };
  readonly redis: { readonly raw: Redis } | undefined;
  /** The leases granted so far (the array grows as the run goes on). */
  readonly held: readonly Held[];
  /** The stalls' total, ms. */
  readonly stallMs: number;
  readonly violation: (text: string) => void;
}

export class Leftovers {
  readonly #plan: Plan;
  readonly #h: BackendHarness;
  readonly #prefix: string;
  readonly #checker: Locks;
  readonly #backend: { readonly cleanupMs: number };
  readonly #redis: { readonly raw: Redis } | undefined;
  readonly #held: readonly Held[];
  readonly #stallMs: number;
  readonly #violation: (text: string) => void;

  constructor(run: LeftoversOf) {
    this.#plan = run.plan;
    this.#h = run.h;
    this.#prefix = run.prefix;
    this.#checker = run.checker;
    this.#backend = run.backend;
    this.#redis = run.redis;
    this.#held = run.held;
    this.#stallMs = run.stallMs;
    this.#violation = run.violation;
  }

  /**
   * What the backend holds for callers that are gone, polled while clean-up may be in flight.
   * `final`: every manager is closed; the semaphore and, on Redis, the keys are looked at too.
   */
  async checkStrays(where: string, final: boolean): Promise<void> {
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
  async checkResources(timersBefore: number, subscribersBefore: number): Promise<void> {
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
