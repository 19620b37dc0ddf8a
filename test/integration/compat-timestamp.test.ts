/**
 * Compat mode (`createLocks({ compat: 'timestamp' })`): latchkey on the same lock key as legacy
 * services running the seeds' timestamp lock (test/helpers/timestamp-peer.ts, written as the
 * seeds describe it). Mutual exclusion between them in separate processes, latchkey never
 * deleting a lock it does not hold, and the mode's documented limit: clock skew.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { randomBytes } from 'node:crypto';
import { buildSync } from 'esbuild';
import { Cluster, Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import {
  BackendError,
  createLocks,
  createMemoryStore,
  InvalidOptionError,
  LeaseLostError,
  UnsupportedError,
  type Locks,
} from '../../src/index.js';
import { COMPAT_LINGER } from '../../src/backend/compat-backend.js';
import { adaptClient } from '../../src/client/detect.js';
import { runScript } from '../../src/lua/run-script.js';
import { compatReleaseScript } from '../../src/lua/scripts.generated.js';
import { aborted } from '../contract/lock-contract.js';
import { uniquePrefix, useRedisServer } from '../helpers/harness.js';
import { TimestampPeer } from '../helpers/timestamp-peer.js';

const redis = useRedisServer();

/** A compat manager on its own connection, closed after the file. */
function compatLocks(settings: { compat?: 'timestamp' | 'timestamp-seconds'; recheck?: number } = {}): Locks {
  const client = new Redis(redis.server.port, '127.0.0.1');
  const locks = createLocks({ compat: 'timestamp', ...settings, redis: client });
  redis.cleanup.push(async () => {
    await locks.close();
    client.disconnect();
  });
  return locks;
}

/** A legacy peer on its own connection. */
function peerOn(key: string, options: ConstructorParameters<typeof TimestampPeer>[2]): TimestampPeer {
  const client = new Redis(redis.server.port, '127.0.0.1');
  redis.cleanup.push(async () => client.disconnect());
  return new TimestampPeer(client, key, options);
}

/** A legacy lock key, as a legacy service would name it (unique per test). */
const legacyKey = (): string => `${uniquePrefix()}Lock.TecentIm_Interface_Counter`;

interface WorkerReport {
  readonly role: 'peer' | 'latchkey';
  readonly acquisitions: number;
  readonly lost: number;
  readonly maxInside: number;
  readonly intervals: Array<[number, number]>;
}

describe('compat mode: interoperating with the legacy timestamp lock', () => {
  const bundle = join(tmpdir(), `latchkey-compat-worker-${randomBytes(4).toString('hex')}.mjs`);
  afterAll(() => rmSync(bundle, { force: true }));

  it('legacy peers and latchkey managers in separate processes never hold the lock at once', async () => {
    // The worker is TypeScript (it imports the peer and latchkey's source): bundle it for node.
    buildSync({
      entryPoints: [new URL('../helpers/compat-worker.ts', import.meta.url).pathname],
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node20',
      outfile: bundle,
      logLevel: 'error',
      banner: { js: "import { createRequire as __latchkeyRequire } from 'node:module'; const require = __latchkeyRequire(import.meta.url);" },
    });
    const key = legacyKey();
    const counter = `${key}:counter`;
    const inside = `${key}:inside`;
    const rounds = 20;
    // The peers' timeout is well above their hold (the seeds' algorithm is only safe then), and
    // latchkey's TTL is below it (see docs/safety.md: a legacy client that loses a GETSET race
    // rewrites the timestamp with its own timeout).
    const common = { port: redis.server.port, key, counter, inside, rounds, workMs: 2, pauseMs: 40, peerTimeout: 500, ttl: 300 };
    const roles = ['peer', 'latchkey', 'peer', 'latchkey', 'peer', 'latchkey'] as const;
    const workers: ChildProcess[] = roles.map((role) =>
      spawn(process.execPath, [bundle, JSON.stringify({ ...common, role })], { stdio: ['pipe', 'pipe', 'inherit'] }),
    );
    const lines = workers.map((w) => createInterface({ input: w.stdout! })[Symbol.asyncIterator]());
    const exits = workers.map((w) => once(w, 'exit') as Promise<[number | null]>);
    for (const line of lines) expect((await line.next()).value).toBe('ready');
    for (const w of workers) w.stdin!.end('go\n');
    const reports = await Promise.all(lines.map(async (line) => JSON.parse((await line.next()).value as string) as WorkerReport));
    for (const [code] of await Promise.all(exits)) expect(code).toBe(0);

    const total = reports.reduce((sum, r) => sum + r.acquisitions, 0);
    expect(total).toBe(roles.length * rounds);
    // Nobody ever saw another holder inside, and no read-modify-write was lost.
    expect(reports.map((r) => r.maxInside)).toEqual(roles.map(() => 1));
    expect(Number(await redis.raw.get(counter))).toBe(total);
    // The holds, from every process, on one timeline: each ends before the next begins.
    const holds = reports.flatMap((r) => r.intervals.map(([start, end]) => ({ start, end, role: r.role }))).sort((a, b) => a.start - b.start);
    for (let i = 1; i < holds.length; i++) expect(holds[i]!.start).toBeGreaterThanOrEqual(holds[i - 1]!.end);
    // Both kinds of client took turns on the key, and legacy holds came right after latchkey ones.
    expect(reports.filter((r) => r.role === 'latchkey').every((r) => r.acquisitions === rounds)).toBe(true);
    expect(holds.some((h, i) => i > 0 && h.role === 'peer' && holds[i - 1]!.role === 'latchkey')).toBe(true);
    // A latchkey lease that a losing GETSET overwrote is reported lost, never deleted: rare here.
    expect(reports.reduce((sum, r) => sum + r.lost, 0)).toBeLessThan(total / 4);
    // Every release, legacy or latchkey, left the key free.
    expect(await redis.raw.exists(key)).toBe(0);
  });

  it('writes what legacy clients parse (the expiry in Unix ms, no prefix), and each side waits for the other', async () => {
    const key = legacyKey();
    const locks = compatLocks();
    const peer = peerOn(key, { timeout: 2000 });
    const before = Date.now();
    const lease = await locks.acquire(key, { ttl: 2000 });
    const value = await redis.raw.get(key);
    expect(value).toMatch(/^\d+$/); // Long.valueOf accepts it
    expect(Number(value)).toBeGreaterThanOrEqual(before + 2000 - 50);
    expect(Number(value)).toBeLessThanOrEqual(Date.now() + 2000 + 50);
    // The key outlives its timestamp by the linger time, so that it never lives forever.
    expect(await redis.raw.pttl(key)).toBeGreaterThan(2000);
    expect(await redis.raw.pttl(key)).toBeLessThanOrEqual(2000 + 1 + COMPAT_LINGER);
    // latchkey's bookkeeping sits beside the legacy key, under its own hash-tagged names.
    expect((await redis.raw.keys(`${key}*`)).sort()).toEqual([key]);
    expect(await redis.raw.get(`{${key}}:owner`)).toBe(lease.token);

    expect(await peer.tryLock()).toBe(false); // a timestamp in the future: the peer waits
    expect(await redis.raw.get(key)).toBe(value); // and wrote nothing (no GETSET on a live lock)
    await lease.release();
    expect(await redis.raw.exists(key)).toBe(0);

    expect(await peer.tryLock()).toBe(true);
    expect(await locks.tryAcquire(key)).toBeNull();
    const info = await locks.inspect(key);
    expect(info).toMatchObject({ name: key, held: true, holder: null });
    expect(info.ttl).toBeGreaterThan(1000);
    expect(info.ttl).toBeLessThanOrEqual(2001);
    const waiting = locks.acquire(key, { wait: 10_000 });
    expect(await peer.unlock()).toBe(true);
    // The peer's DEL announces nothing: the waiter finds the lock free at its next recheck.
    const next = await waiting;
    expect(next.fence).toBeGreaterThan(lease.fence);
    await next.release();
  });

  it("never deletes a legacy holder's lock: not after its lease expired and a peer took over, nor after a peer overwrote or replaced the key", async () => {
    const key = legacyKey();
    const locks = compatLocks();
    const peer = peerOn(key, { timeout: 5000 });

    // 1. The lease expires; a peer sees the past timestamp and takes over with GETSET.
    const expired = await locks.acquire(key, { ttl: 100 });
    await aborted(expired.signal);
    await peer.lock(); // spins (30 ms) until its clock passes the timestamp: the peer's own algorithm
    const peerValue = await redis.raw.get(key);
    expect(await redis.raw.pttl(key)).toBe(-1); // GETSET dropped latchkey's expiry
    await expect(expired.release()).rejects.toMatchObject({ code: 'LEASE_LOST', reason: 'expired' });
    expect(await redis.raw.get(key)).toBe(peerValue);
    // The lease object knew it had expired; the release script, sent anyway with its token, refuses too.
    const stale = await runScript(adaptClient(redis.raw), compatReleaseScript, [key, `{${key}}:owner`, `{${key}}:queue`, `{${key}}:alive`], [expired.token, 'latchkey:inbox:']);
    expect(stale).toBe(-1);
    expect(await redis.raw.get(key)).toBe(peerValue);
    expect(await peer.unlock()).toBe(true);

    // 2. A peer loses a GETSET race against a live latchkey lease: it has overwritten the timestamp
    //    (the seeds' "slight error"). The lease is no longer provably ours: latchkey leaves the key.
    const overwritten = await locks.acquire(key, { ttl: 5000 });
    const loserValue = String(peer.now() + 5000 + 1);
    expect(Number(await redis.raw.getset(key, loserValue))).toBeGreaterThan(peer.now()); // the loser's GETSET: a live timestamp
    const error = await overwritten.release().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LeaseLostError);
    expect(error).toMatchObject({ reason: 'taken' });
    expect(await redis.raw.get(key)).toBe(loserValue);
    await redis.raw.del(key);

    // 3. A peer that overran its timeout deletes the key (its release re-reads a live timestamp:
    //    the seeds' rule), and another peer sets it again with SETNX, maybe with the very same value.
    const replaced = await locks.acquire(key, { ttl: 5000 });
    const sameValue = await redis.raw.get(key);
    await redis.raw.del(key);
    expect(await redis.raw.setnx(key, sameValue!)).toBe(1);
    await expect(replaced.release()).rejects.toMatchObject({ code: 'LEASE_LOST', reason: 'taken' });
    expect(await redis.raw.get(key)).toBe(sameValue);
    await redis.raw.del(key);
  });

  it('an operator can force-release a legacy holder (only while it still holds that timestamp)', async () => {
    const key = legacyKey();
    const locks = compatLocks();
    const peer = peerOn(key, { timeout: 60_000 });
    await peer.lock();
    const broken = await locks.forceRelease(key);
    expect(broken).toMatchObject({ name: key, held: true, holder: null });
    expect(await redis.raw.exists(key)).toBe(0);
    expect(await locks.forceRelease(key)).toBeNull();
  });

  it('the documented limit: with clocks apart by more than the time left, a legacy client takes over a live lease, or latchkey a live legacy one', async () => {
    const key = legacyKey();
    const locks = compatLocks();
    const lease = await locks.acquire(key, { ttl: 3000 });
    // Clocks that agree within the time left: the lease is respected.
    expect(await peerOn(key, { timeout: 3000 }).tryLock()).toBe(false);
    expect(await peerOn(key, { timeout: 3000, clock: () => Date.now() + 1000 }).tryLock()).toBe(false);
    expect(lease.held).toBe(true);
    // A clock 5 s ahead reads latchkey's timestamp as past: GET, then GETSET, and the peer "wins"
    // while the lease is still valid by the Redis server's clock. Two holders: this is why the
    // mode needs synchronised clocks (docs/safety.md). Fencing cannot help: legacy clients send no fence.
    const skewed = peerOn(key, { timeout: 3000, clock: () => Date.now() + 5000 });
    expect(await skewed.tryLock()).toBe(true);
    expect(lease.held).toBe(true);
    expect((await locks.inspect(key)).held).toBe(true);
    // latchkey sees the key rewritten: its lease is lost, and the skewed peer's lock is left alone.
    await expect(lease.extend()).rejects.toMatchObject({ code: 'LEASE_LOST', reason: 'taken' });
    const value = await redis.raw.get(key);
    await expect(lease.release()).rejects.toBeInstanceOf(LeaseLostError);
    expect(await redis.raw.get(key)).toBe(value);
    await redis.raw.del(key);

    // The other way round: a legacy client whose clock is 5 s behind writes a timestamp that is
    // already past by the server's clock, and latchkey takes its lock over while it works.
    const behind = peerOn(key, { timeout: 3000, clock: () => Date.now() - 5000 });
    expect(await behind.tryLock()).toBe(true);
    const over = await locks.tryAcquire(key);
    expect(over).not.toBeNull();
    await over!.release();
  });

  it('timestamp-seconds: the expiry in Unix seconds, with legacy clients that count in seconds', async () => {
    const key = legacyKey();
    const locks = compatLocks({ compat: 'timestamp-seconds' });
    const peer = peerOn(key, { timeout: 2, unit: 1000 });
    const before = Date.now();
    const lease = await locks.acquire(key, { ttl: 1500 });
    const value = Number(await redis.raw.get(key));
    // Seconds, rounded up: no legacy client sees it expire before the lease does.
    expect(value * 1000).toBeGreaterThanOrEqual(before + 1500 - 50);
    expect(value * 1000).toBeLessThan(Date.now() + 1500 + 1000 + 50);
    expect(await peer.tryLock()).toBe(false);
    await lease.release();
    expect(await peer.tryLock()).toBe(true);
    expect(await locks.tryAcquire(key)).toBeNull();
    expect(await peer.unlock()).toBe(true);
    const next = await locks.tryAcquire(key);
    expect(next).not.toBeNull();
    await next!.release();
  });

  it('refuses what the mode cannot do: other backends, Cluster, replication, list, a key that is not a timestamp', async () => {
    expect(() => createLocks({ compat: 'timestamp' })).toThrow(InvalidOptionError);
    expect(() => createLocks({ compat: 'timestamp', memory: createMemoryStore() })).toThrow(/only with "redis" or "url".*memory/);
    expect(() => createLocks({ compat: 'timestamp', redlock: [redis.server.url] })).toThrow(/only with "redis" or "url".*redlock/);
    const client = new Redis(redis.server.port, '127.0.0.1');
    redis.cleanup.push(async () => client.disconnect());
    expect(() => createLocks({ compat: 'timestamps' as 'timestamp', redis: client })).toThrow(InvalidOptionError);
    expect(() => createLocks({ compat: 'timestamp', redis: client, replication: { replicas: 1 } })).toThrow(InvalidOptionError);
    const cluster = new Cluster([{ host: '127.0.0.1', port: redis.server.port }], { lazyConnect: true });
    expect(() => createLocks({ compat: 'timestamp', redis: cluster })).toThrow(/not a Cluster client/);
    cluster.disconnect();

    const locks = compatLocks();
    await expect(locks.list()).rejects.toBeInstanceOf(UnsupportedError);
    const key = legacyKey();
    await redis.raw.set(key, 'not-a-timestamp');
    const error = await locks.acquire(key, { wait: 0 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BackendError);
    expect((error as Error).message).toMatch(/not a timestamp/);
    expect(await redis.raw.get(key)).toBe('not-a-timestamp');
    await redis.raw.del(key);
  });

  it('refuses a timestamp of the other unit (the wrong mode), which would let two hold the lock, and writes nothing', async () => {
    // Legacy services in seconds, latchkey in milliseconds: their live timestamp reads as 1970.
    const inMs = compatLocks({ compat: 'timestamp' });
    const key = legacyKey();
    const seconds = String(Math.floor(Date.now() / 1000) + 60);
    await redis.raw.set(key, seconds);
    for (const call of [inMs.tryAcquire(key), inMs.acquire(key, { wait: 0 }), inMs.inspect(key)]) {
      const error = await call.catch((e: unknown) => e);
      expect(error).toBeInstanceOf(BackendError);
      expect((error as Error).message).toMatch(/a Unix time in seconds: give createLocks\(\{ compat: 'timestamp-seconds' \}\)/);
    }
    expect(await redis.raw.get(key)).toBe(seconds);
    // Legacy services in milliseconds, latchkey in seconds: theirs reads as the year 55,000.
    const inSeconds = compatLocks({ compat: 'timestamp-seconds' });
    const ms = String(Date.now() + 60_000);
    await redis.raw.set(key, ms);
    const error = await inSeconds.tryAcquire(key).catch((e: unknown) => e);
    expect((error as Error).message).toMatch(/a Unix time in milliseconds: give createLocks\(\{ compat: 'timestamp' \}\)/);
    expect(await redis.raw.get(key)).toBe(ms);
    await redis.raw.del(key);
  });
});
