/**
 * Observability: OpenTelemetry metrics (checked through the SDK's in-memory exporter) and spans,
 * hooks, the injected logger, and silence when nothing is configured. On a real redis-server
 * (ioredis) and the in-memory backend; nothing of Redis is mocked.
 */
import { metrics, SpanStatusCode } from '@opentelemetry/api';
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
  type DataPoint,
  type Histogram,
  type MetricData,
} from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  createLocks,
  createMemoryStore,
  LeaseLostError,
  LockTimeoutError,
  QuorumError,
  type AcquiredEvent,
  type AcquireFailedEvent,
  type Lease,
  type LockHooks,
  type Logger,
  type LostEvent,
  type QuorumFailedEvent,
  type ReleasedEvent,
  type RenewedEvent,
  type RenewFailedEvent,
} from '../../src/index.js';
import { lockKeys } from '../../src/keys.js';
import { createObserver } from '../../src/observe/observer.js';
import { pastValidity } from '../contract/lease-end-contract.js';
import { uniquePrefix, useRedisServer } from '../helpers/harness.js';
import { freePort } from '../helpers/redis-server.js';

const redis = useRedisServer();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

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

/** A logger that keeps every record, pino style (`obj, msg`). */
function recordingLogger(): Logger & { records: Array<{ level: string; obj: object; msg: string | undefined }> } {
  const records: Array<{ level: string; obj: object; msg: string | undefined }> = [];
  const at = (level: string) => (obj: object, msg?: string) => void records.push({ level, obj, msg });
  return { records, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

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

  /** A tracer provider whose finished spans are kept by the SDK's in-memory exporter. */
  function tracerSetup() {
    const exporter = new InMemorySpanExporter();
    const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    return { exporter, tracerProvider };
  }
  /** Everything a span carries that could leak: attributes, events and their attributes, status. */
  const spanText = (spans: ReadableSpan[]): string =>
    JSON.stringify(spans.map((s) => ({ name: s.name, attributes: s.attributes, events: s.events, status: s.status })));
  const hrMs = ([seconds, nanos]: [number, number]): number => seconds * 1000 + nanos / 1e6;

  it('records acquire, hold and release as spans: the release a child of the hold, renewals as events of the hold, no lock name or token anywhere', async () => {
    const { exporter, tracerProvider } = tracerSetup();
    const client = new Redis(redis.server.port, '127.0.0.1');
    const prefix = uniquePrefix();
    let renewals = 0;
    const locks = createLocks({ redis: client, prefix, tracerProvider, keyGroup: (name) => name.split(':')[0]!, hooks: { renewed: () => void renewals++ } });
    try {
      const lease = await locks.acquire('orders:9', { ttl: 1_000, renew: { every: 40 } });
      await vi.waitFor(() => expect(renewals).toBeGreaterThanOrEqual(2), { timeout: 2_000 });
      await expect(locks.acquire('orders:9', { wait: 50 })).rejects.toThrow(LockTimeoutError);
      await lease.release();
      const spans = exporter.getFinishedSpans();
      expect(spans.map((s) => s.name)).toEqual(['latchkey.acquire', 'latchkey.acquire', 'latchkey.release', 'latchkey.hold']);
      const [acquired, timedOut, release, hold] = spans as [ReadableSpan, ReadableSpan, ReadableSpan, ReadableSpan];
      const base = { 'latchkey.kind': 'lock', 'latchkey.prefix': prefix, 'latchkey.backend': locks.backend, 'latchkey.key.group': 'orders' };
      expect(acquired.attributes).toEqual({ ...base, 'latchkey.outcome': 'acquired', 'latchkey.contended': false, 'latchkey.fence': lease.fence });
      expect(timedOut.attributes).toEqual({ ...base, 'latchkey.outcome': 'timeout', 'latchkey.contended': true, 'error.type': 'LOCK_TIMEOUT' });
      expect(timedOut.status).toEqual({ code: SpanStatusCode.ERROR, message: 'LOCK_TIMEOUT' });

      expect(hold.attributes).toEqual({ ...base, 'latchkey.fence': lease.fence, 'latchkey.lease.end': 'released' });
      expect(hold.status.code).toBe(SpanStatusCode.UNSET);
      expect(hold.events.filter((e) => e.name === 'latchkey.renewed').length).toBeGreaterThanOrEqual(2);
      expect(hrMs(hold.endTime) - hrMs(hold.startTime)).toBeGreaterThanOrEqual(80); // two renewals 40 ms apart, and the timeout's 50 ms

      expect(release.attributes).toEqual({ ...base, 'latchkey.outcome': 'released' });
      expect(release.parentSpanContext?.spanId).toBe(hold.spanContext().spanId);
      expect(release.spanContext().traceId).toBe(hold.spanContext().traceId);

      const text = spanText(spans);
      expect(text).not.toContain('orders:9');
      expect(text).not.toContain(lease.token);
    } finally {
      await locks.close();
      client.disconnect();
      await tracerProvider.shutdown();
    }
  });

  it('ends the hold span of a lost lease with status error and the reason, and records a release that failed', async () => {
    const { exporter, tracerProvider } = tracerSetup();
    const client = new Redis(redis.server.port, '127.0.0.1');
    const prefix = uniquePrefix();
    let renewals = 0;
    const locks = createLocks({ redis: client, prefix, tracerProvider, hooks: { renewed: () => void renewals++ } });
    const tokens: string[] = [];
    try {
      // Deleted behind its back: the release finds it gone.
      const gone = await locks.acquire('jobs:1');
      tokens.push(gone.token);
      await redis.raw.del(lockKeys(prefix, 'jobs:1').lock);
      await expect(gone.release()).rejects.toMatchObject({ name: 'LeaseLostError', reason: 'gone' });
      // Lost while renewed, after two renewals: no release span; the renewal that found it lost ends the hold.
      const renewed = await locks.acquire('jobs:2', { ttl: 1_000, renew: { every: 40 } });
      tokens.push(renewed.token);
      await vi.waitFor(() => expect(renewals).toBeGreaterThanOrEqual(2), { timeout: 2_000 });
      await redis.raw.del(lockKeys(prefix, 'jobs:2').lock);
      await vi.waitFor(() => expect(renewed.state).toBe('lost'), { timeout: 2_000 });
      // A semaphore's permits are held the same way.
      await (await locks.semaphore('pool', { limit: 2 }).acquire()).release();

      const spans = exporter.getFinishedSpans().filter((s) => s.name !== 'latchkey.acquire');
      expect(spans.map((s) => s.name)).toEqual(['latchkey.release', 'latchkey.hold', 'latchkey.hold', 'latchkey.release', 'latchkey.hold']);
      const [goneRelease, goneHold, renewedHold, permitRelease, permitHold] = spans as [ReadableSpan, ReadableSpan, ReadableSpan, ReadableSpan, ReadableSpan];
      expect(goneRelease.attributes).toMatchObject({ 'latchkey.outcome': 'lost', 'latchkey.lost.reason': 'gone' });
      expect(goneRelease.parentSpanContext?.spanId).toBe(goneHold.spanContext().spanId);
      for (const [hold, fence] of [[goneHold, gone.fence], [renewedHold, renewed.fence]] as const) {
        expect(hold.attributes).toMatchObject({ 'latchkey.fence': fence, 'latchkey.lease.end': 'lost', 'latchkey.lost.reason': 'gone', 'error.type': 'LEASE_LOST' });
        expect(hold.status).toEqual({ code: SpanStatusCode.ERROR, message: 'lease lost: gone' });
      }
      expect(renewedHold.events.filter((e) => e.name === 'latchkey.renewed').length).toBeGreaterThanOrEqual(2);
      expect(permitHold.attributes).toMatchObject({ 'latchkey.kind': 'semaphore', 'latchkey.lease.end': 'released' });
      expect(permitRelease.parentSpanContext?.spanId).toBe(permitHold.spanContext().spanId);

      // A release that cannot reach Redis: the release span says so; the lease stays held until its TTL, so its hold is still open.
      exporter.reset();
      const stranded = await locks.acquire('jobs:3');
      tokens.push(stranded.token);
      client.disconnect();
      await expect(stranded.release()).rejects.toMatchObject({ code: 'BACKEND_ERROR' });
      const [failedRelease, ...rest] = exporter.getFinishedSpans().filter((s) => s.name !== 'latchkey.acquire');
      expect(rest).toEqual([]);
      expect(failedRelease?.name).toBe('latchkey.release');
      expect(failedRelease?.attributes).toMatchObject({ 'latchkey.outcome': 'error', 'error.type': 'BACKEND_ERROR' });
      expect(failedRelease?.status.code).toBe(SpanStatusCode.ERROR);

      const text = spanText(exporter.getFinishedSpans().concat(spans));
      for (const name of ['jobs:1', 'jobs:2', 'jobs:3', 'pool']) expect(text).not.toContain(name);
      for (const token of tokens) expect(text).not.toContain(token);
    } finally {
      await locks.close();
      client.disconnect();
      await tracerProvider.shutdown();
    }
  });

  it('records the release of a lease whose validity ran out unwatched as lost (expired), though it deleted the key still there', async () => {
    const { exporter, tracerProvider } = tracerSetup();
    const client = new Redis(redis.server.port, '127.0.0.1');
    const prefix = uniquePrefix();
    // Validity ends half a TTL before the key expires in Redis: the release still finds the key.
    const locks = createLocks({ redis: client, prefix, tracerProvider, driftFactor: 0.5 });
    try {
      const lease = await locks.acquire('jobs:4', { ttl: 400 });
      await pastValidity(lease);
      await expect(lease.release()).rejects.toMatchObject({ name: 'LeaseLostError', reason: 'expired' });
      expect(await redis.raw.exists(lockKeys(prefix, 'jobs:4').lock)).toBe(0);
      const spans = exporter.getFinishedSpans().filter((s) => s.name !== 'latchkey.acquire');
      expect(spans.map((s) => s.name)).toEqual(['latchkey.hold', 'latchkey.release']);
      const [hold, release] = spans as [ReadableSpan, ReadableSpan];
      expect(hold.attributes).toMatchObject({ 'latchkey.lease.end': 'lost', 'latchkey.lost.reason': 'expired', 'error.type': 'LEASE_LOST' });
      expect(release.attributes).toMatchObject({ 'latchkey.outcome': 'lost', 'latchkey.lost.reason': 'expired' });
    } finally {
      await locks.close();
      client.disconnect();
      await tracerProvider.shutdown();
    }
  });
});

describe('observability: hooks and logger (in-memory backend)', () => {
  it('calls the hooks with typed payloads that carry no token', async () => {
    const events: Array<[string, unknown]> = [];
    const hooks: LockHooks = {
      acquired: (e: AcquiredEvent) => events.push(['acquired', e]),
      acquireFailed: (e: AcquireFailedEvent) => events.push(['acquireFailed', e]),
      released: (e: ReleasedEvent) => events.push(['released', e]),
      lost: (e: LostEvent) => events.push(['lost', e]),
      renewed: (e: RenewedEvent) => events.push(['renewed', e]),
      renewFailed: (e: RenewFailedEvent) => events.push(['renewFailed', e]),
    };
    const store = createMemoryStore();
    const locks = createLocks({ memory: store, hooks, prefix: 'h:' });
    try {
      const lease = await locks.acquire('a', { ttl: 300, renew: { every: 50 } });
      await vi.waitFor(() => expect(events.some(([name]) => name === 'renewed')).toBe(true), { timeout: 2_000 });
      expect(await locks.tryAcquire('a')).toBeNull();
      await lease.release();
      const lost = await locks.acquire('b');
      store.forceRelease(lockKeys('h:', 'b').lock);
      await expect(lost.release()).rejects.toThrow(LeaseLostError);

      const names = events.map(([name]) => name);
      expect(names.filter((n) => n !== 'renewed')).toEqual(['acquired', 'acquireFailed', 'released', 'acquired', 'lost']);
      expect(events[0]![1]).toEqual({ key: 'a', kind: 'lock', prefix: 'h:', backend: 'memory', fence: lease.fence, duration: expect.any(Number), contended: false });
      expect(events.find(([n]) => n === 'renewed')![1]).toEqual({ key: 'a', kind: 'lock', prefix: 'h:', backend: 'memory', fence: lease.fence });
      expect(events.find(([n]) => n === 'acquireFailed')![1]).toMatchObject({ key: 'a', outcome: 'busy', contended: true });
      expect(events.find(([n]) => n === 'released')![1]).toMatchObject({ key: 'a', fence: lease.fence, held: expect.any(Number) });
      const lostEvent = events.find(([n]) => n === 'lost')![1] as LostEvent;
      expect(lostEvent).toMatchObject({ key: 'b', fence: lost.fence, reason: 'gone' });
      expect(lostEvent.error).toBeInstanceOf(LeaseLostError);
      const text = JSON.stringify(events);
      expect(text).not.toContain(lease.token);
      expect(text).not.toContain(lost.token);
    } finally {
      await locks.close();
    }
  });

  it('counts each lock acquireAll takes, and not a reentrant call that joins its scope\'s lease', async () => {
    const acquired: string[] = [];
    const released: string[] = [];
    const locks = createLocks({ reentrant: true, hooks: { acquired: (e) => acquired.push(e.key), released: (e) => released.push(e.key) } });
    try {
      await locks.withLocks(['b', 'a'], async () => {});
      await locks.withLock('c', async () => {
        await (await locks.acquire('c')).release(); // joins the scope's lease
        await locks.withLock('c', async () => {});
      });
      expect(acquired).toEqual(['a', 'b', 'c']);
      expect(released.sort()).toEqual(['a', 'b', 'c']);
    } finally {
      await locks.close();
    }
  });

  it('does not count a misuse (bad options, a closed manager) as an acquire', async () => {
    const failed: AcquireFailedEvent[] = [];
    const locks = createLocks({ hooks: { acquireFailed: (e) => failed.push(e) } });
    await expect(locks.acquire('a', { ttl: -1 })).rejects.toThrow(/ttl/);
    await locks.close();
    await expect(locks.acquire('a')).rejects.toThrow(/closed/);
    expect(failed).toEqual([]);
  });

  it('a hook that throws breaks nothing: the lock works and the logger gets a warning', async () => {
    const logger = recordingLogger();
    const locks = createLocks({ logger, hooks: { acquired: () => { throw new Error('boom'); } } });
    try {
      const lease = await locks.acquire('x');
      expect(lease.held).toBe(true);
      await lease.release();
      expect(logger.records).toContainEqual(expect.objectContaining({ level: 'warn', obj: expect.objectContaining({ latchkey: 'hookFailed', hook: 'acquired' }) }));
    } finally {
      await locks.close();
    }
  });

  it('sends the logger structured records, and no token, even of a lost lease or a renewal that failed', async () => {
    const logger = recordingLogger();
    const store = createMemoryStore();
    const locks = createLocks({ memory: store, logger, prefix: 'l:' });
    const tokens: string[] = [];
    const keep = (lease: Lease) => (tokens.push(lease.token), lease);
    try {
      await keep(await locks.acquire('orders:1')).release();
      const holder = keep(await locks.acquire('orders:2'));
      await expect(locks.acquire('orders:2', { wait: 30 })).rejects.toThrow(LockTimeoutError);
      await holder.release();
      const renewed = keep(await locks.acquire('orders:3', { ttl: 300, renew: { every: 40 } }));
      await sleep(60);
      store.forceRelease(lockKeys('l:', 'orders:3').lock);
      await vi.waitFor(() => expect(renewed.state).toBe('lost'), { timeout: 2_000 });

      const byKind = (kind: string) => logger.records.filter((r) => (r.obj as { latchkey?: string }).latchkey === kind);
      expect(byKind('acquired')[0]).toMatchObject({ level: 'debug', obj: { key: 'orders:1', kind: 'lock', prefix: 'l:', backend: 'memory', fence: expect.any(Number) } });
      expect(byKind('acquireFailed')).toEqual([expect.objectContaining({ level: 'info', obj: expect.objectContaining({ key: 'orders:2', outcome: 'timeout', err: expect.objectContaining({ name: 'LockTimeoutError' }) }) })]);
      expect(byKind('released').length).toBe(2);
      expect(byKind('renewFailed')[0]).toMatchObject({ level: 'warn', obj: { key: 'orders:3', err: { name: 'LeaseLostError', reason: 'gone' } } });
      expect(byKind('lost')[0]).toMatchObject({ level: 'warn', obj: { key: 'orders:3', reason: 'gone' }, msg: expect.stringContaining('lost') });
      const text = JSON.stringify(logger.records);
      for (const token of tokens) expect(text).not.toContain(token);
      expect(text).not.toMatch(/"token"/);
    } finally {
      await locks.close();
    }
  });

  it('with nothing configured, records nothing and prints nothing', async () => {
    expect(createObserver({}, 'latchkey:', 'memory')).toBeUndefined(); // no SDK registered: no instrumentation at all
    const writes = [vi.spyOn(process.stdout, 'write'), vi.spyOn(process.stderr, 'write')];
    const consoles = (['log', 'info', 'warn', 'error', 'debug'] as const).map((m) => vi.spyOn(console, m));
    const store = createMemoryStore();
    const locks = createLocks({ memory: store, prefix: 'q:' });
    try {
      const lease = await locks.acquire('a', { ttl: 300, renew: { every: 40 } });
      await expect(locks.acquire('a', { wait: 20 })).rejects.toThrow(LockTimeoutError);
      store.forceRelease(lockKeys('q:', 'a').lock);
      await vi.waitFor(() => expect(lease.state).toBe('lost'), { timeout: 2_000 });
      for (const spy of [...writes, ...consoles]) expect(spy).not.toHaveBeenCalled();
    } finally {
      for (const spy of [...writes, ...consoles]) spy.mockRestore();
      await locks.close();
    }
  });

  it('rejects observability options of the wrong shape', () => {
    expect(() => createLocks({ logger: console.log as unknown as Logger })).toThrow(/logger/);
    expect(() => createLocks({ hooks: { acquird: () => {} } as unknown as LockHooks })).toThrow(/hooks\.acquird/);
    expect(() => createLocks({ meterProvider: {} as never })).toThrow(/meterProvider/);
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
