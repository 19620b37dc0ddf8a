/**
 * Observability on the in-memory backend: hooks, the injected logger, and silence when nothing is
 * configured; options of the wrong shape rejected.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it, vi } from 'vitest';
import {
  createLocks,
  createMemoryStore,
  LeaseLostError,
  LockTimeoutError,
  type AcquiredEvent,
  type AcquireFailedEvent,
  type Lease,
  type LockHooks,
  type Logger,
  type LostEvent,
  type ReleasedEvent,
  type RenewedEvent,
  type RenewFailedEvent,
} from '../../src/index.js';
import { lockKeys } from '../../src/keys.js';
import { observerFor } from '../../src/observe/observer.js';

/** A logger that keeps every record, pino style (`obj, msg`). */
function recordingLogger(): Logger & { records: Array<{ level: string; obj: object; msg: string | undefined }> } {
  const records: Array<{ level: string; obj: object; msg: string | undefined }> = [];
  const at = (level: string) => (obj: object, msg?: string) => void records.push({ level, obj, msg });
  return { records, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

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

  it('a lease left to expire ends as asked: released with end "expired", not lost, and no warning', async () => {
    const events: Array<[string, unknown]> = [];
    let heard!: () => void;
    const ended = new Promise<void>((resolve) => (heard = resolve));
    const logger = recordingLogger();
    const hooks: LockHooks = {
      released: (e: ReleasedEvent) => (events.push(['released', e]), heard()),
      lost: (e: LostEvent) => (events.push(['lost', e]), heard()),
    };
    const locks = createLocks({ memory: createMemoryStore(), hooks, logger, prefix: 'h:' });
    try {
      const lease = await locks.acquire('tick', { ttl: 50 });
      lease.letExpire(); // nothing reads its signal or looks at it again: its end is still recorded
      await ended;
      expect(events).toEqual([['released', expect.objectContaining({ key: 'tick', fence: lease.fence, end: 'expired' })]]);
      expect(logger.records.filter((r) => r.level === 'warn' || r.level === 'error')).toEqual([]);
      await (await locks.acquire('again', { ttl: 1000 })).release();
      expect(events.at(-1)).toEqual(['released', expect.objectContaining({ key: 'again', end: 'released' })]);
    } finally {
      await locks.close();
    }
  });

  it('records a multi-lock whose one-step attempt ends the call: busy for each key of a try, the error of one that failed', async () => {
    const failed: AcquireFailedEvent[] = [];
    const store = createMemoryStore();
    const other = createLocks({ memory: store, prefix: 'h:' });
    const locks = createLocks({ memory: store, prefix: 'h:', hooks: { acquireFailed: (e) => failed.push(e) } });
    try {
      const held = await other.acquire('m2');
      expect(await locks.tryAcquireAll(['m1', 'm2'])).toBeNull();
      expect(failed.map((e) => [e.key, e.outcome, e.contended])).toEqual([
        ['m1', 'busy', true],
        ['m2', 'busy', true],
      ]);
      const stop = new AbortController();
      stop.abort(new Error('gave up'));
      await expect(locks.acquireAll(['m1', 'm3'], { signal: stop.signal })).rejects.toThrow('gave up');
      expect(failed.slice(2).map((e) => [e.key, e.outcome])).toEqual([
        ['m1', 'aborted'],
        ['m3', 'aborted'],
      ]);
      await held.release();
    } finally {
      await locks.close();
      await other.close();
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
    expect(observerFor({}, 'latchkey:')('memory')).toBeUndefined(); // no SDK registered: no instrumentation at all
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
