/**
 * The replies latchkey reads, as each client × protocol cell delivers them (ioredis 5 and 6,
 * node-redis 5 and 6, RESP2 and RESP3, iovalkey, Valkey GLIDE): every script reply shape the
 * backends parse (a Lua `false` among them), CONFIG GET, INFO and CLIENT ID, WAIT, SCAN, the
 * error replies the script runner recognises, and a message on the subscriber connection. The
 * contract suite runs the locks on these cells; this file pins the shapes themselves, so that a
 * client whose defaults change is caught here first, with the reply in the failure.
 */
import { GlideClient, Logger as GlideLogger, ProtocolVersion } from '@valkey/valkey-glide';
import { Valkey } from 'iovalkey';
import { createClient as createClient6 } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acquireCall, acquireReply, asSnapshot } from '../../src/backend/redis-calls.js';
import { configValue } from '../../src/backend/eviction-policy.js';
import { adaptClient } from '../../src/client/detect.js';
import { isNoScript, isWrongType, type ScriptClient } from '../../src/client/script-client.js';
import { lockKeys } from '../../src/keys.js';
import { runScript } from '../../src/lua/run-script.js';
import { acquireScript, fencedReadScript, inspectScript } from '../../src/lua/scripts.generated.js';
import { checkEvictionPolicy, createLocks, type RedisClientLike } from '../../src/index.js';
import { CLIENT_CELLS } from '../helpers/client-cells.js';
import { uniquePrefix, useRedisServer } from '../helpers/harness.js';
import type { RedisServer } from '../helpers/redis-server.js';

const redis = useRedisServer();

interface Subject {
  readonly label: string;
  /** A connected client of this cell, closed by the file's clean-up. */
  connect(server: RedisServer): Promise<unknown>;
}

const subjects: Subject[] = [
  ...CLIENT_CELLS.map((cell) => ({
    label: cell.label,
    connect: async (server: RedisServer) => {
      if (cell.driver === 'ioredis') {
        const client = cell.make(server.port);
        redis.cleanup.push(() => client.quit());
        return client;
      }
      const client = cell.make(server.url);
      client.on('error', () => {});
      await client.connect();
      redis.cleanup.push(() => client.close());
      return client;
    },
  })),
  {
    label: 'iovalkey 0.4 (RESP2)',
    connect: async (server) => {
      const client = new Valkey(server.port, '127.0.0.1');
      redis.cleanup.push(() => client.quit());
      return client;
    },
  },
  ...[ProtocolVersion.RESP3, ProtocolVersion.RESP2].map((protocol) => ({
    label: `Valkey GLIDE 2 (${protocol})`,
    connect: async (server: RedisServer) => {
      const client = await GlideClient.createClient({ addresses: [{ host: '127.0.0.1', port: server.port }], requestTimeout: 2000, protocol });
      redis.cleanup.push(async () => client.close());
      return client;
    },
  })),
];

beforeAll(() => GlideLogger.setLoggerConfig('error'));

describe.each(subjects)('replies through $label', (subject) => {
  let client: unknown;
  let adapted: ScriptClient;
  beforeAll(async () => {
    client = await subject.connect(redis.server);
    adapted = adaptClient(client);
  });
  afterAll(async () => {
    await adapted.close(); // a borrowed client: closes nothing
  });

  it('a Lua false arrives as null, also on RESP3 (a script replies in RESP2 unless it calls redis.setresp(3)); true as 1', async () => {
    expect(await adapted.eval("return {false, 1, 'a', false, true}", [], [])).toEqual([null, 1, 'a', null, 1]);
    expect(await adapted.eval('return false', [], [])).toBeNull();
    expect(await adapted.eval('return nil', [], [])).toBeNull();
  });

  it('inspect.lua on a lock never held (its falses) and on a held one parse to the same snapshots', async () => {
    const keys = lockKeys(uniquePrefix(), 'shape');
    const free = asSnapshot(await runScript(adapted, inspectScript, [keys.lock, keys.fence, keys.queue], []));
    expect(free).toEqual({ token: null, ttl: 0, fence: null, queued: 0, since: null });
    await redis.raw.set(keys.lock, 'tok', 'PX', 10_000);
    await redis.raw.set(keys.fence, '1795614530460300');
    const held = asSnapshot(await runScript(adapted, inspectScript, [keys.lock, keys.fence, keys.queue], []));
    // since: from the fence, a server clock reading in µs.
    expect(held).toMatchObject({ token: 'tok', fence: 1795614530460300, queued: 0, since: 1795614530460 });
    expect(held.ttl).toBeGreaterThan(0);
  });

  it("acquire.lua's busy replies parse: {0, pttl}, and {0, pttl, tag} when the holding token is tagged", async () => {
    const keys = lockKeys(uniquePrefix(), 'busy');
    const queue = { member: 'm:1', entryTtl: 3000 };
    const busy = async (queued = false) => {
      const call = acquireCall(keys, 'other', 5000, queued ? queue : undefined);
      return acquireReply(await runScript(adapted, acquireScript, call.keys, call.args), acquireScript);
    };
    await redis.raw.set(keys.lock, 'tok', 'PX', 10_000);
    expect(await busy()).toEqual({ acquired: false, ttl: expect.any(Number) }); // not a tagged token
    await redis.raw.set(keys.lock, `c0ffee00${'7'.repeat(32)}`, 'PX', 10_000);
    expect(await busy()).toEqual({ acquired: false, ttl: expect.any(Number), holderTag: 'c0ffee00' });
    expect(await busy(true)).toEqual({ acquired: false, ttl: expect.any(Number), holderTag: 'c0ffee00' });
  });

  it('fenced-read.lua: nil when never written', async () => {
    expect(await runScript(adapted, fencedReadScript, [`${uniquePrefix()}resource`], [])).toBeNull();
  });

  it('CONFIG GET (a flat array on RESP2, a map on RESP3) gives the policy; INFO and CLIENT ID give the connection identity; WAIT and SCAN', async () => {
    expect(configValue(await adapted.configGet!('maxmemory-policy'), 'maxmemory-policy')).toBe('noeviction');
    expect(await checkEvictionPolicy(client)).toEqual({ policy: 'noeviction', maxmemory: 0, evictsLockKeys: false });
    if (adapted.connectionId) expect(await adapted.connectionId()).toMatch(/^[0-9a-f]{40}:\d+$/);
    expect(await adapted.waitReplicas(0, 0)).toBe(0);
    const prefix = uniquePrefix();
    await redis.raw.set(`${prefix}{a}`, '1');
    expect(await adapted.scan(`${prefix}*`)).toEqual([`${prefix}{a}`]);
  });

  it('NOSCRIPT and WRONGTYPE are recognised', async () => {
    const missing = await adapted.evalsha('0'.repeat(40), [], []).catch((error: unknown) => error);
    expect(isNoScript(missing), String(missing)).toBe(true);
    const key = `${uniquePrefix()}list`;
    await redis.raw.rpush(key, 'x');
    const wrong = await adapted.eval("return redis.call('GET', KEYS[1])", [key], []).catch((error: unknown) => error);
    expect(isWrongType(wrong), String(wrong)).toBe(true);
  });

  it('the subscriber connection delivers (channel, message)', async () => {
    const sub = await adapted.createSubscriber();
    try {
      const channel = `${uniquePrefix()}inbox`;
      const received = new Promise<[string, string]>((resolve) => sub.onMessage((from, message) => resolve([from, message])));
      await sub.subscribe(channel);
      await redis.raw.publish(channel, 'w1 7');
      expect(await received).toEqual([channel, 'w1 7']);
    } finally {
      await sub.close();
    }
  });

  it('a lock: taken, inspected with its fence and then its holder, released', async () => {
    const locks = createLocks({ redis: client as RedisClientLike, prefix: uniquePrefix(), holder: 'replies test' });
    try {
      const lease = await locks.acquire('one', { ttl: 5000 });
      expect(await locks.inspect('one')).toMatchObject({ held: true, fence: lease.fence });
      // The holder is recorded off the acquire's path, in a second script.
      await expect.poll(async () => (await locks.inspect('one')).holder?.who, { timeout: 2000, interval: 5 }).toBe('replies test');
      await lease.release();
      expect((await locks.inspect('one')).held).toBe(false);
    } finally {
      await locks.close();
    }
  });
});

describe("node-redis 6's command timeout (5 s by default)", () => {
  // Shortened to 200 ms here: it is the same mechanism. node-redis arms it when a command is
  // queued and disarms it once the command is written to the socket, so it ends only commands
  // that never left the client (a connection that is down): a slow script or a long WAIT is not
  // cut off, and an acquire it ends was never sent.
  const TIMEOUT = 200;
  const connect = async () => {
    const client = createClient6({ url: redis.server.url, commandOptions: { timeout: TIMEOUT } });
    client.on('error', () => {});
    await client.connect();
    redis.cleanup.push(() => client.close());
    return client;
  };

  it('does not cut off a WAIT longer than it, nor an acquire that Redis answers after it', async () => {
    const client = await connect();
    const adapted = adaptClient(client);
    const started = performance.now();
    expect(await adapted.waitReplicas(1, 3 * TIMEOUT)).toBe(0); // no replica: WAIT runs its full timeout
    expect(performance.now() - started).toBeGreaterThanOrEqual(3 * TIMEOUT - 5);

    const locks = createLocks({ redis: client, prefix: uniquePrefix() });
    try {
      await redis.raw.call('CLIENT', 'PAUSE', String(3 * TIMEOUT), 'WRITE');
      const paused = performance.now();
      const lease = await locks.acquire('slow', { ttl: 10_000, wait: 10_000 });
      expect(performance.now() - paused).toBeGreaterThanOrEqual(2 * TIMEOUT);
      await lease.release();
    } finally {
      await locks.close();
    }
  });
});
