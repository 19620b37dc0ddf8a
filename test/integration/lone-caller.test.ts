/**
 * The lone caller's calls on one Redis (issue 20): a lock nobody else wants costs two scripts of
 * two keys each, acquire.lua with two arguments and release-key.lua with one; a lock found held
 * or waited for lately gets the full calls (the queue's keys on the first attempt, release.lua),
 * so that contention costs no extra round trip; a lone caller's release that finds a waiter
 * queued meanwhile still passes the lock on to it, in one more round trip. Counted with MONITOR on
 * a private redis-server.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocks, type Lease, type Locks } from '../../src/index.js';
import { acquireScript, releaseKeyScript, releaseScript } from '../../src/lua/scripts.generated.js';
import { rawClient, uniquePrefix } from '../helpers/harness.js';
import { RedisServer } from '../helpers/redis-server.js';

let server: RedisServer;
let monitor: Redis;
/** Every EVALSHA the server ran, as `<script>/<number of keys>/<number of arguments>`. */
const seen: string[] = [];
const names = new Map([
  [acquireScript.sha, 'acquire'],
  [releaseKeyScript.sha, 'release-key'],
  [releaseScript.sha, 'release'],
]);

beforeAll(async () => {
  server = await RedisServer.start();
  monitor = rawClient(server);
  const feed = await monitor.monitor();
  feed.on('monitor', (_time: string, args: string[]) => {
    if (args[0]?.toLowerCase() === 'echo') seen.push(`marker ${args[1]}`);
    if (args[0]?.toLowerCase() !== 'evalsha') return;
    const keys = Number(args[2]);
    seen.push(`${names.get(args[1]!) ?? 'other'}/${keys}/${args.length - 3 - keys}`);
  });
});

afterAll(async () => {
  monitor.disconnect();
  await server.stop();
});

/** The lock scripts (acquire.lua, release-key.lua, release.lua) the server ran for the calls in `fn`, in order (MONITOR reports each command as it runs: an ECHO sent last marks the end); others (a waiter's lookup of who holds the lock) are left out. */
async function scriptsOf(client: Redis, fn: () => Promise<void>): Promise<string[]> {
  const marker = uniquePrefix();
  await client.call('ECHO', `${marker}:start`);
  await expect.poll(() => seen.includes(`marker ${marker}:start`), { timeout: 2000, interval: 1 }).toBe(true);
  seen.length = 0;
  await fn();
  await client.call('ECHO', `${marker}:end`);
  await expect.poll(() => seen.includes(`marker ${marker}:end`), { timeout: 2000, interval: 1 }).toBe(true);
  return seen.filter((s) => !s.startsWith('marker') && !s.startsWith('other'));
}

describe('a lone caller on one Redis', () => {
  let client: Redis;
  let locks: Locks;
  beforeAll(async () => {
    client = rawClient(server);
    locks = createLocks({ redis: client, prefix: uniquePrefix(), holder: false });
  });
  afterAll(async () => {
    await locks.close();
    client.disconnect();
  });

  it('takes and releases a free lock in two scripts of two keys: acquire.lua with two arguments, release-key.lua with one', async () => {
    const scripts = await scriptsOf(client, async () => {
      const lease = await locks.acquire('alone');
      await lease.release();
    });
    expect(scripts).toEqual(['acquire/2/2', 'release-key/2/1']);
  });

  it('passes the lock on to a waiter that queued meanwhile (release.lua after release-key.lua); a lock found held lately gets the full calls', async () => {
    const prefix = uniquePrefix();
    const [clientA, clientB] = [rawClient(server), rawClient(server)];
    const a = createLocks({ redis: clientA, prefix, holder: false });
    const b = createLocks({ redis: clientB, prefix, holder: false });
    try {
      const held = await b.acquire('shared');
      let waiting: Promise<Lease> | undefined;
      const queued = await scriptsOf(client, async () => {
        waiting = a.acquire('shared', { wait: 5000 });
        await expect.poll(() => client.zcard(`${prefix}{shared}:queue`), { timeout: 2000, interval: 5 }).toBe(1);
      });
      // a's first attempt does not queue (the lock was not found held lately); it finds the lock
      // held, and its next attempt, sent at once, queues.
      expect(queued).toEqual(['acquire/2/2', 'acquire/4/5']);
      const handOff = await scriptsOf(client, async () => {
        await held.release();
        const granted = await waiting!;
        expect(granted.fence).toBeGreaterThan(held.fence);
        await granted.release();
      });
      // b's release finds the queue: release.lua grants the lock to a, which needs no attempt of
      // its own. a found the lock held: its release is release.lua's at once.
      expect(handOff).toEqual(['release-key/2/1', 'release/4/2', 'release/4/2']);
      // And its next acquire queues with its first attempt (its inbox listens now).
      const full = await scriptsOf(client, async () => {
        await (await a.acquire('shared')).release();
      });
      expect(full).toEqual(['acquire/4/5', 'release/4/2']);
    } finally {
      await a.close();
      await b.close();
      clientA.disconnect();
      clientB.disconnect();
    }
  });
});
