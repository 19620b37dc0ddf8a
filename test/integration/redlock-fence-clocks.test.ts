/**
 * Redlock fences and the callers' clocks, on three redis-server processes of this file's own
 * (every one of them is restarted empty here, which no other test's connections should see): a
 * caller whose wall clock runs ahead cannot push the nodes' fence counters past their clocks, so
 * fences stay increasing when every node restarts without its data.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rawClient, uniquePrefix, managerOver } from '../helpers/harness.js';
import { RedisServer } from '../helpers/redis-server.js';

const servers: RedisServer[] = [];
const cleanup: Array<() => Promise<unknown>> = [];

beforeAll(async () => {
  servers.push(...(await Promise.all([RedisServer.start(), RedisServer.start(), RedisServer.start()])));
});
afterAll(async () => {
  for (const step of cleanup.reverse()) await step();
  await Promise.all(servers.map((s) => s.stop()));
});

/** Takes one lease on `name` in a worker process whose Date.now and performance.timeOrigin run `aheadMs` fast; resolves to its fence. */
async function fenceFromClockAhead(aheadMs: number, prefix: string, name: string): Promise<number> {
  const child = spawn(
    process.execPath,
    [new URL('../helpers/clock-ahead-process.mjs', import.meta.url).pathname, String(aheadMs), prefix, name, ...servers.map((s) => s.url)],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const exited = once(child, 'exit');
  const [line] = (await once(createInterface({ input: child.stdout! }), 'line')) as [string];
  expect(line).toMatch(/^acquired \d+$/);
  expect(await exited).toEqual([0, null]); // it released the lease and closed
  return Number(line.split(' ')[1]);
}

describe('Redlock fences and a caller whose clock runs ahead', () => {
  it('stay increasing after every node restarts empty: the fast caller got no fence above the servers\' clocks', async () => {
    const prefix = uniquePrefix();
    const name = 'clock-ahead';
    const aheadFence = await fenceFromClockAhead(3_600_000, prefix, name); // an hour fast
    // Every node restarts empty (no persistence). The lease was released first, so no lease
    // lives that a node coming back at once could let a second holder into: what is lost is the
    // fence counters, and a node without one starts again from its own clock.
    await Promise.all(servers.map((s) => s.restart()));
    const clients = servers.map((s) => new Redis(s.port, '127.0.0.1', { maxRetriesPerRequest: 0 }));
    const locks = managerOver(cleanup, clients, { prefix, redlock: clients });
    const lease = await locks.acquire(name, { ttl: 5000, wait: 5000 });
    await lease.release();
    expect(lease.fence).toBeGreaterThan(aheadFence);
    // The bound that makes it hold: no node issued the fast caller a fence above its own clock.
    const raw = rawClient(servers[0]!);
    const [seconds, micros] = await raw.time();
    raw.disconnect();
    expect(aheadFence).toBeLessThanOrEqual(Number(seconds) * 1e6 + Number(micros));
  });
});
