/**
 * Observability: OpenTelemetry metrics, checked through the SDK's in-memory exporter, on a real
 * redis-server (ioredis; nothing of Redis is mocked) and from the global meter provider. Spans are
 * in observability-spans.test.ts, hooks and the logger in observability-hooks.test.ts.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { metrics } from '@opentelemetry/api';
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
  type DataPoint,
  type Histogram,
  type MetricData,
} from '@opentelemetry/sdk-metrics';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createLocks, LockTimeoutError, QuorumError, type QuorumFailedEvent } from '../../src/index.js';
import { lockKeys } from '../../src/keys.js';
import { uniquePrefix, useRedisServer } from '../helpers/fixtures.js';
import { freePort } from '../helpers/redis-server.js';

const redis = useRedisServer();

/** A meter provider whose metrics are read through the SDK's in-memory exporter. */
function meterSetup() {
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 60_000 });
  const meterProvider = new MeterProvider({ readers: [reader] });
  const collect = async (): Promise<Map<string, MetricData>> => {
    await reader.forceFlush();
    const byName = new Map<string, MetricData>();
    for (const rm of exporter.getMetrics()) for (const sm of rm.scopeMetrics) for (const m of sm.metrics) byName.set(m.descriptor.name, m);
    exporter.reset();
    return byName;
  };
  return { meterProvider, collect, shutdown: () => meterProvider.shutdown() };
}

type Point = DataPoint<number | Histogram>;
const points = (m: MetricData | undefined): Point[] => (m?.dataPoints ?? []) as Point[];
const matching = (m: MetricData | undefined, attrs: Record<string, unknown>): Point[] =>
  points(m).filter((p) => Object.entries(attrs).every(([k, v]) => p.attributes[k] === v));
const countOf = (p: Point): number => (typeof p.value === 'number' ? p.value : p.value.count);
const total = (m: MetricData | undefined, attrs: Record<string, unknown> = {}): number => matching(m, attrs).reduce((n, p) => n + countOf(p), 0);

describe('observability: OpenTelemetry metrics (redis-server, ioredis)', () => {
  it('records acquire duration by outcome, contention, hold time, renewals and leases lost with their reason, per prefix, never by lock name', async () => {
    const { meterProvider, collect, shutdown } = meterSetup();
    const client = new Redis(redis.server.port, '127.0.0.1');
    const prefix = uniquePrefix();
    const locks = createLocks({ redis: client, prefix, meterProvider, keyGroup: (name) => name.split(':')[0]! });
    const other = createLocks({ redis: client, prefix });
    try {
      // Uncontended.
      await (await locks.acquire('orders:1')).release();

      // Contended: waits for another manager's lease, released after 150 ms.
      const held = await other.acquire('orders:2');
      setTimeout(() => void held.release(), 150);
      const waited = await locks.acquire('orders:2', { wait: 5_000 });
      await waited.release();

      // A timeout and a busy tryAcquire.
      const blocker = await other.acquire('orders:3');
      await expect(locks.acquire('orders:3', { wait: 100 })).rejects.toThrow(LockTimeoutError);
      expect(await locks.tryAcquire('orders:3')).toBeNull();
      await blocker.release();

      // A lease deleted behind its back: release finds it gone.
      const doomed = await locks.acquire('orders:4');
      await redis.raw.del(lockKeys(prefix, 'orders:4').lock);
      await expect(doomed.release()).rejects.toMatchObject({ name: 'LeaseLostError', reason: 'gone' });

      // A renewed lease: renewals succeed, then one finds the key deleted.
      const renewed = await locks.acquire('jobs:5', { ttl: 300, renew: { every: 50 } });
      await sleep(140);
      await redis.raw.del(lockKeys(prefix, 'jobs:5').lock);
      await vi.waitFor(() => expect(renewed.state).toBe('lost'), { timeout: 2_000 });

      // A semaphore permit.
      await (await locks.semaphore('pool', { limit: 2 }).acquire()).release();

      const m = await collect();
      const base = { 'latchkey.prefix': prefix, 'latchkey.backend': locks.backend };
      const acquire = m.get('latchkey.acquire.duration');
      expect(acquire?.descriptor.unit).toBe('s');
      expect(total(acquire, { ...base, 'latchkey.kind': 'lock', 'latchkey.outcome': 'acquired', 'latchkey.contended': false })).toBe(3);
      const contendedAcquire = matching(acquire, { ...base, 'latchkey.outcome': 'acquired', 'latchkey.contended': true });
      expect(contendedAcquire.map(countOf)).toEqual([1]);
      expect((contendedAcquire[0]!.value as Histogram).sum).toBeGreaterThanOrEqual(0.1); // it waited ~150 ms
      expect(total(acquire, { ...base, 'latchkey.outcome': 'timeout', 'latchkey.contended': true })).toBe(1);
      expect(total(acquire, { ...base, 'latchkey.outcome': 'busy' })).toBe(1);
      expect(total(acquire, { 'latchkey.kind': 'semaphore', 'latchkey.outcome': 'acquired', 'latchkey.key.group': 'pool' })).toBe(1);
      expect(total(acquire, { 'latchkey.key.group': 'orders' })).toBe(5); // orders:1, :2, :3 twice, :4

      expect(total(m.get('latchkey.acquire.contended'), base)).toBe(3); // the wait, the timeout, the busy try

      const hold = m.get('latchkey.lease.hold.duration');
      expect(total(hold, { ...base, 'latchkey.lease.end': 'released', 'latchkey.kind': 'lock' })).toBe(2); // orders:1, orders:2
      expect(total(hold, { ...base, 'latchkey.lease.end': 'released', 'latchkey.kind': 'semaphore' })).toBe(1);
      expect(total(hold, { ...base, 'latchkey.lease.end': 'lost' })).toBe(2);
      expect(total(m.get('latchkey.lease.lost'), { ...base, 'latchkey.lost.reason': 'gone' })).toBe(2);

      const renewals = m.get('latchkey.lease.renewal');
      expect(total(renewals, { ...base, 'latchkey.outcome': 'ok' })).toBeGreaterThanOrEqual(1);
      expect(total(renewals, { ...base, 'latchkey.outcome': 'failed' })).toBe(1);

      // Cardinality: no attribute anywhere carries a lock name.
      for (const metric of m.values()) {
        for (const p of points(metric)) {
          for (const value of Object.values(p.attributes)) expect(['orders:1', 'orders:2', 'orders:3', 'orders:4', 'jobs:5']).not.toContain(value);
        }
      }
    } finally {
      await locks.close();
      await other.close();
      client.disconnect();
      await shutdown();
    }
  });

  it('counts a Redlock acquire that reaches no quorum, and calls the quorumFailed hook with the votes', async () => {
    const { meterProvider, collect, shutdown } = meterSetup();
    // One live master and two addresses where nothing listens: their votes are errors.
    const live = new Redis(redis.server.port, '127.0.0.1');
    const dead = await Promise.all([freePort(), freePort()]).then((ports) =>
      ports.map((port) => {
        const client = new Redis(port, '127.0.0.1', { enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => 1_000 });
        client.on('error', () => {});
        return client;
      }),
    );
    const seen: QuorumFailedEvent[] = [];
    const locks = createLocks({ redlock: [live, ...dead], prefix: uniquePrefix(), nodeTimeout: 50, meterProvider, hooks: { quorumFailed: (e) => seen.push(e) } });
    try {
      await expect(locks.tryAcquire('orders:1')).rejects.toThrow(QuorumError);
      expect(seen).toHaveLength(1);
      expect(seen[0]).toMatchObject({ key: 'orders:1', operation: 'acquire', outcome: { quorum: 2, for: 1, errors: 2 } });
      const m = await collect();
      expect(total(m.get('latchkey.quorum.failure'), { 'latchkey.operation': 'acquire' })).toBe(1);
      expect(total(m.get('latchkey.acquire.duration'), { 'latchkey.outcome': 'error' })).toBe(1);
    } finally {
      await locks.close();
      for (const c of [live, ...dead]) c.disconnect();
      await shutdown();
    }
  });
});

describe('observability: the global OpenTelemetry API', () => {
  afterEach(() => metrics.disable());

  it('uses the global meter provider an SDK registered before the manager was created', async () => {
    const { meterProvider, collect, shutdown } = meterSetup();
    metrics.setGlobalMeterProvider(meterProvider);
    const locks = createLocks({ prefix: 'g:' });
    try {
      await (await locks.acquire('a')).release();
      const m = await collect();
      expect(total(m.get('latchkey.acquire.duration'), { 'latchkey.prefix': 'g:', 'latchkey.backend': 'memory', 'latchkey.outcome': 'acquired' })).toBe(1);
      expect(total(m.get('latchkey.lease.hold.duration'), { 'latchkey.prefix': 'g:', 'latchkey.lease.end': 'released' })).toBe(1);
    } finally {
      await locks.close();
      await shutdown();
    }
  });
});
