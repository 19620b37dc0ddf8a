/**
 * examples/cron-replicas.mjs: several replica processes fire at the same ticks against one
 * private redis-server; each tick is run by exactly one of them.
 */
import { describe, expect, it } from 'vitest';
import { useRedisServer } from '../helpers/fixtures.js';
import { startExample } from './run-example.js';

const redis = useRedisServer();

interface TickLine {
  tick: number;
  ran: boolean;
  fence?: number;
  error?: string;
}

const lines = (stdout: string): TickLine[] =>
  stdout.split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as TickLine);

describe('examples/cron-replicas.mjs', () => {
  it('runs each tick exactly once across 4 replicas', async () => {
    const replicas = Array.from({ length: 4 }, () =>
      startExample('cron-replicas.mjs', ['--every', '400', '--ticks', '4', '--job', 'once'], { REDIS_URL: redis.server.url }),
    );
    const codes = await Promise.all(replicas.map((r) => r.exited()));
    for (const r of replicas) expect(r.stderr()).toBe('');
    expect(codes).toEqual([0, 0, 0, 0]);

    const byTick = new Map<number, TickLine[]>();
    for (const r of replicas) for (const line of lines(r.stdout())) byTick.set(line.tick, [...(byTick.get(line.tick) ?? []), line]);
    for (const [tick, fired] of byTick) {
      expect(fired.filter((l) => l.ran), `tick ${tick}`).toHaveLength(1);
      expect(fired.every((l) => l.error === undefined)).toBe(true);
    }
    // Replicas start some ms apart, so the first and last ticks may have fewer; the middle ones
    // are fired by all four.
    expect([...byTick.values()].filter((fired) => fired.length === 4).length).toBeGreaterThanOrEqual(1);

    // What the job wrote: one run per tick, fences growing with the ticks.
    const runs = (await redis.raw.lrange('cron-example:once:runs', 0, -1)).map((r) => JSON.parse(r) as { tick: number; fence: number });
    expect(runs.map((r) => r.tick)).toEqual([...byTick.keys()].sort((a, b) => a - b));
    for (let i = 1; i < runs.length; i++) expect(runs[i]!.fence).toBeGreaterThan(runs[i - 1]!.fence);
  });

  it('stops a run that outlasts its TTL: the lease signal aborts the job', async () => {
    const replica = startExample('cron-replicas.mjs', ['--every', '300', '--ttl', '100', '--job-ms', '5000', '--ticks', '1', '--job', 'slow'], {
      REDIS_URL: redis.server.url,
    });
    expect(await replica.exited()).toBe(0);
    const [line] = lines(replica.stdout());
    expect(line).toMatchObject({ ran: true });
    expect(line!.error).toMatch(/LeaseLostError/);
    expect(await redis.raw.llen('cron-example:slow:runs')).toBe(0);
  });
});
