/**
 * Observability: OpenTelemetry spans, kept by the SDK's in-memory exporter, on a real redis-server
 * (ioredis; nothing of Redis is mocked): acquire, hold and release, a lost lease, a release that
 * failed. (The describe block keeps the name it had beside the metrics tests, in
 * observability-metrics.test.ts, so that the tests' full names are unchanged.)
 */
import { SpanStatusCode } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { Redis } from 'ioredis';
import { describe, expect, it, vi } from 'vitest';
import { createLocks, LockTimeoutError, type Locks } from '../../src/index.js';
import { lockKeys } from '../../src/keys.js';
import { pastValidity } from '../contract/lease-end-contract.js';
import { uniquePrefix, useRedisServer } from '../helpers/fixtures.js';

const redis = useRedisServer();

describe('observability: OpenTelemetry metrics (redis-server, ioredis)', () => {
  /**
   * A tracer provider whose finished spans are kept by the SDK's in-memory exporter, a client of
   * the test's server, and `end(...managers)`: closes them, then the client and the provider.
   */
  function tracerSetup() {
    const exporter = new InMemorySpanExporter();
    const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const client = new Redis(redis.server.port, '127.0.0.1');
    const end = async (...managers: Locks[]): Promise<void> => {
      for (const manager of managers) await manager.close();
      client.disconnect();
      await tracerProvider.shutdown();
    };
    return { exporter, tracerProvider, client, end };
  }
  /** Everything a span carries that could leak: attributes, events and their attributes, status. */
  const spanText = (spans: ReadableSpan[]): string =>
    JSON.stringify(spans.map((s) => ({ name: s.name, attributes: s.attributes, events: s.events, status: s.status })));
  const hrMs = ([seconds, nanos]: [number, number]): number => seconds * 1000 + nanos / 1e6;

  it('records acquire, hold and release as spans: the release a child of the hold, renewals as events of the hold, no lock name or token anywhere', async () => {
    const { exporter, tracerProvider, client, end } = tracerSetup();
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
      await end(locks);
    }
  });

  it('ends the hold span of a lost lease with status error and the reason, and records a release that failed', async () => {
    const { exporter, tracerProvider, client, end } = tracerSetup();
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
      await end(locks);
    }
  });

  it('gives every acquire span an outcome: a reentrant call that joined its scope, and a misuse (with its error type)', async () => {
    const { exporter, tracerProvider, client, end } = tracerSetup();
    const locks = createLocks({ redis: client, prefix: uniquePrefix(), tracerProvider, reentrant: true });
    try {
      await locks.withLock('jobs:outer', async (outer) => {
        const inner = await locks.acquire('jobs:outer'); // joins the scope's lease
        expect(inner.fence).toBe(outer.fence);
        await inner.release();
      });
      await expect(locks.acquire('')).rejects.toMatchObject({ code: 'INVALID_OPTION' });
      const acquires = exporter.getFinishedSpans().filter((s) => s.name === 'latchkey.acquire');
      expect(acquires.map((s) => s.attributes['latchkey.outcome'])).toEqual(['acquired', 'acquired', 'error']);
      expect(acquires.map((s) => s.attributes['latchkey.reentrant'] ?? false)).toEqual([false, true, false]);
      expect(acquires[1]!.attributes['latchkey.fence']).toBe(acquires[0]!.attributes['latchkey.fence']);
      expect(acquires[2]!.attributes['error.type']).toBe('INVALID_OPTION');
    } finally {
      await end(locks);
    }
  });

  it('names a forced release as forced in the release span too, as in the hold span: the release ends first', async () => {
    const { exporter, tracerProvider, client, end } = tracerSetup();
    const prefix = uniquePrefix();
    const locks = createLocks({ redis: client, prefix, tracerProvider });
    const operator = createLocks({ redis: client, prefix });
    try {
      const lease = await locks.acquire('jobs:forced');
      expect(await operator.forceRelease('jobs:forced')).toMatchObject({ name: 'jobs:forced', held: true });
      await expect(lease.release()).rejects.toMatchObject({ name: 'LeaseLostError', reason: 'forced' });
      const spans = exporter.getFinishedSpans().filter((s) => s.name !== 'latchkey.acquire');
      expect(spans.map((s) => s.name)).toEqual(['latchkey.release', 'latchkey.hold']);
      expect(spans[0]!.attributes).toMatchObject({ 'latchkey.outcome': 'lost', 'latchkey.lost.reason': 'forced' });
      expect(spans[1]!.attributes).toMatchObject({ 'latchkey.lease.end': 'lost', 'latchkey.lost.reason': 'forced' });
    } finally {
      await end(operator, locks);
    }
  });

  it('records the release of a lease whose validity ran out unwatched as lost (expired), though it deleted the key still there', async () => {
    const { exporter, tracerProvider, client, end } = tracerSetup();
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
      await end(locks);
    }
  });
});
