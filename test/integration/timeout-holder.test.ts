/**
 * Who holds a lock (issue 21), on a real server, with nothing written per lease: every token of a
 * manager starts with its tag, the manager registers its description under that tag once, and a
 * busy reply names the tag (never the rest of the token). The uncontended path sends what it
 * always sent. The shared cases (a timeout names the holder, `holder: false`) are in
 * test/contract/timeout-holder-contract.ts.
 */
import { hostname } from 'node:os';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { createLocks, LockTimeoutError, type Locks, type LocksOptions } from '../../src/index.js';
import { acquireCall, acquireReply } from '../../src/backend/redis-calls.js';
import { adaptClient } from '../../src/client/detect.js';
import { lockKeys } from '../../src/keys.js';
import { runScript } from '../../src/lua/run-script.js';
import { acquireScript, registerHolderScript } from '../../src/lua/scripts.generated.js';
import { TokenSource } from '../../src/token.js';
import { uniquePrefix, useRedisServer } from '../helpers/harness.js';

const redis = useRedisServer();

function manager(options: Omit<LocksOptions, 'redis'>): Locks {
  const client = new Redis(redis.server.port, '127.0.0.1');
  const locks = createLocks({ ...options, redis: client });
  redis.cleanup.push(async () => {
    await locks.close();
    client.disconnect();
  });
  return locks;
}

/** The commands the server ran since the last call (SLOWLOG logs every command at threshold 0), oldest first: [name or script sha, key count]. */
async function commandsRun(): Promise<string[]> {
  const entries = (await redis.raw.slowlog('GET', 1000)) as [number, number, number, string[]][];
  await redis.raw.slowlog('RESET');
  return entries
    .map((entry) => entry[3])
    .filter((args) => /^eval(sha)?$/i.test(args[0]!)) // the calls, not the commands the scripts ran
    .map((args) => (/^evalsha$/i.test(args[0]!) ? `${args[1] === acquireScript.sha ? 'acquire' : args[1] === registerHolderScript.sha ? 'register' : 'script'}/${args[2]}` : args[0]!.toLowerCase()))
    .reverse();
}

describe('who holds a lock, with nothing written per lease', () => {
  it('a default manager sends the same two calls per acquire and release, and registers once', async () => {
    const prefix = uniquePrefix();
    const l = manager({ prefix });
    await redis.raw.config('SET', 'slowlog-max-len', '1000');
    await redis.raw.config('SET', 'slowlog-log-slower-than', '0');
    try {
      // Every script in the server's cache first: a cache miss adds an EVAL of the same call.
      await (await manager({ prefix }).acquire('warm-up')).release();
      await redis.raw.script('LOAD', registerHolderScript.source);
      await redis.raw.slowlog('RESET');
      for (let i = 0; i < 20; i++) await (await l.acquire(`free-${i % 3}`)).release();
      const run = await commandsRun();
      // Each pair: acquire.lua on 2 keys (lock, fence), release-key.lua on 2 (lock, queue: a lone
      // caller's release); one registration in all.
      expect(run.filter((c) => c === 'register/1')).toHaveLength(1);
      expect(run.filter((c) => c === 'acquire/2')).toHaveLength(20);
      expect(run.filter((c) => c === 'script/2')).toHaveLength(20);
      expect(run).toHaveLength(41);
    } finally {
      await redis.raw.config('SET', 'slowlog-log-slower-than', '10000');
    }
  });

  it('inspect names a default holder by host and pid, with since from its fence; the token never shows', async () => {
    const prefix = uniquePrefix();
    const [a, b] = [manager({ prefix }), manager({ prefix })];
    const before = Date.now();
    const lease = await a.acquire('named', { ttl: 10_000 });
    const info = await b.inspect('named');
    expect(info.holder?.who).toBe(`${hostname()} pid ${process.pid}`);
    expect(Math.abs(info.holder!.since! - before)).toBeLessThan(2000);
    expect(JSON.stringify(info)).not.toContain(lease.token);
    expect(lease.token).toMatch(/^[0-9a-f]{40}$/);
    await lease.release();
  });

  it('holder: false registers nothing: the lock is shown as held by nobody known', async () => {
    const prefix = uniquePrefix();
    const [a, b] = [manager({ prefix, holder: false }), manager({ prefix })];
    const lease = await a.acquire('anonymous', { ttl: 10_000 });
    expect((await b.inspect('anonymous')).holder).toBeNull();
    expect(await redis.raw.keys(`${prefix}holder:*`)).toEqual([]);
    const error = (await b.acquire('anonymous', { wait: 0 }).catch((e: unknown) => e)) as LockTimeoutError;
    expect(error).toBeInstanceOf(LockTimeoutError);
    expect(error.holder).toBeUndefined();
    await lease.release();
  });

  it("acquire.lua's busy reply names the holding token's tag, and only for a tagged token", async () => {
    const keys = lockKeys(uniquePrefix(), 'busy');
    const adapted = adaptClient(redis.raw);
    const busy = async (queued: boolean) => {
      const call = acquireCall(keys, new TokenSource().next(), 5000, queued ? { member: 'm:1', entryTtl: 3000 } : undefined);
      return acquireReply(await runScript(adapted, acquireScript, call.keys, call.args), acquireScript);
    };
    const holding = new TokenSource('0123abcd').next();
    await redis.raw.set(keys.lock, holding, 'PX', 10_000);
    expect(await busy(false)).toEqual({ acquired: false, ttl: expect.any(Number), holderTag: '0123abcd' });
    expect(await busy(true)).toEqual({ acquired: false, ttl: expect.any(Number), holderTag: '0123abcd' });
    // Another client's value (not a tagged token): no tag.
    await redis.raw.set(keys.lock, 'legacy-holder', 'PX', 10_000);
    expect(await busy(false)).toEqual({ acquired: false, ttl: expect.any(Number) });
  });

  it('compat mode: a latchkey holder is named by default; a legacy holder is not', async () => {
    const prefix = uniquePrefix();
    const [a, b] = [manager({ prefix, compat: 'timestamp', holder: 'new-service' }), manager({ prefix, compat: 'timestamp' })];
    const held = await a.acquire('shared', { ttl: 10_000 });
    expect((await b.inspect('shared')).holder?.who).toBe('new-service');
    const named = (await b.acquire('shared', { wait: 120 }).catch((e: unknown) => e)) as LockTimeoutError;
    expect(named).toBeInstanceOf(LockTimeoutError);
    expect(named.holder).toBe('new-service');
    await held.release();
    // A legacy client's SETNX of an expiry timestamp (no PX): no tag, nobody named.
    await redis.raw.set(`${prefix}legacy`, String(Date.now() + 10_000));
    const anonymous = (await b.acquire('legacy', { wait: 120 }).catch((e: unknown) => e)) as LockTimeoutError;
    expect(anonymous).toBeInstanceOf(LockTimeoutError);
    expect(anonymous.holder).toBeUndefined();
    expect((await b.inspect('legacy')).holder).toBeNull();
  });
});
