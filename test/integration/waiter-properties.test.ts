/**
 * Property test of the waiters (issue 17): random interleavings of acquire, tryAcquire, semaphore
 * permits, aborts (at once, after a microtask, after some ms), timeouts, releases, extends and
 * closes over two or three managers sharing one backend, with the Redis server stalled
 * (`DEBUG SLEEP`) at random points, so that attempts in flight outlive their caller's deadline.
 * After each run: mutual exclusion held, every call settled in time with an allowed outcome, and
 * nothing is left behind (queue entries, locks, timers, subscriptions). See
 * test/helpers/waiter-run.ts for the exact properties, waiter-plan.ts for what a run does.
 *
 * Seeded and bounded: `npm test` runs a fixed seed and few runs per backend. To replay a failure,
 * give the seed and path fast-check printed (and pick the backend with -t):
 *   LATCHKEY_PROP_SEED=<seed> LATCHKEY_PROP_PATH=<path> npx vitest run test/integration/waiter-properties.test.ts -t ioredis
 * A long run, on a random seed that is printed: LATCHKEY_PROP_RUNS=500 npx vitest run test/integration/waiter-properties.test.ts
 */
import fc from 'fast-check';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { ioredisHarness, memoryHarness, nodeRedisHarness, rawClient, type BackendHarness } from '../helpers/harness.js';
import { RedisServer } from '../helpers/redis-server.js';
import { plans } from '../helpers/waiter-plan.js';
import { runPlan, type RunBackend } from '../helpers/waiter-run.js';

const DEFAULT_SEED = 1717;

/** The runs' settings: the default (fixed seed, few runs, a time budget per backend), or a long run asked for by LATCHKEY_PROP_RUNS. */
function settings(defaultRuns: number, budgetMs: number): { seed: number; numRuns: number; budgetMs: number; path?: string } {
  const env = process.env;
  const long = env.LATCHKEY_PROP_RUNS === undefined ? undefined : Number(env.LATCHKEY_PROP_RUNS);
  if (long !== undefined && !(Number.isInteger(long) && long > 0)) throw new Error(`LATCHKEY_PROP_RUNS must be a positive integer, got "${env.LATCHKEY_PROP_RUNS}"`);
  const given = env.LATCHKEY_PROP_SEED === undefined ? undefined : Number(env.LATCHKEY_PROP_SEED);
  if (given !== undefined && !Number.isInteger(given)) throw new Error(`LATCHKEY_PROP_SEED must be an integer, got "${env.LATCHKEY_PROP_SEED}"`);
  const seed = given ?? (long === undefined ? DEFAULT_SEED : (Math.random() * 2 ** 31) | 0);
  const path = env.LATCHKEY_PROP_PATH;
  return { seed, numRuns: long ?? defaultRuns, budgetMs: long === undefined ? budgetMs : Infinity, ...(path ? { path } : {}) };
}

/**
 * Checks the properties on `backend` with fast-check. A run still in flight when the time budget
 * interrupts fast-check is awaited before the test ends, so that it never outlives its server.
 */
async function check(backend: RunBackend, defaultRuns: number, budgetMs: number): Promise<void> {
  const { seed, numRuns, budgetMs: budget, path } = settings(defaultRuns, budgetMs);
  if (process.env.LATCHKEY_PROP_RUNS !== undefined) console.log(`waiter properties on ${backend.name}: seed ${seed}, ${numRuns} runs`);
  let running: Promise<unknown> = Promise.resolve();
  try {
    await fc.assert(
      fc.asyncProperty(plans(backend.redis !== undefined), async (plan) => {
        const run = runPlan(backend, plan);
        running = run.catch(() => {});
        const violations = await run;
        if (violations.length > 0) throw new Error(`${violations.length} violation(s):\n  ${violations.join('\n  ')}`);
      }),
      {
        seed,
        numRuns,
        // A replayed path runs that one case, without shrinking it further.
        ...(path ? { path, endOnFailure: true } : {}),
        ...(budget === Infinity ? {} : { interruptAfterTimeLimit: budget }),
      },
    );
  } finally {
    await running;
  }
}

const timeoutFor = (budgetMs: number): number => (process.env.LATCHKEY_PROP_RUNS === undefined ? budgetMs + 10_000 : 24 * 60 * 60 * 1000);

describe('waiter properties', () => {
  it('hold on the in-memory backend (managers sharing one store)', async () => {
    await check({ name: 'memory', harness: async () => memoryHarness(), cleanupMs: 50 }, 40, 12_000);
  }, timeoutFor(12_000));

  describe('on one Redis server', () => {
    let server: RedisServer;
    let raw: Redis;
    let stall: Redis;
    beforeAll(async () => {
      server = await RedisServer.start();
      raw = rawClient(server);
      stall = rawClient(server);
    });
    afterAll(async () => {
      raw?.disconnect();
      stall?.disconnect();
      await server?.stop();
    });
    const backend = (name: string, harness: (server: RedisServer) => Promise<BackendHarness>): RunBackend => ({
      name,
      harness: () => harness(server),
      cleanupMs: 300,
      get redis() {
        return { raw, stall };
      },
    });

    it('hold through ioredis, with the server stalled at random points', async () => {
      await check(backend('redis via ioredis', ioredisHarness), 30, 20_000);
    }, timeoutFor(20_000));

    it('hold through node-redis, with the server stalled at random points', async () => {
      await check(backend('redis via node-redis', nodeRedisHarness), 15, 12_000);
    }, timeoutFor(12_000));
  });
});
