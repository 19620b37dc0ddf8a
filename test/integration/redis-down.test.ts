/**
 * A Redis that is down or does not answer (issue 18): every call settles on latchkey's own
 * clock, whatever the client's retry settings, and an unreachable server is reported as
 * unreachable (UnreachableError, code UNREACHABLE, naming the server), never as a lock held by
 * another owner. Clients are left at their defaults (ioredis: 20 retries per request; node-redis:
 * an offline queue that waits for ever).
 */
import { createServer, type Server, type Socket } from 'node:net';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createLocks, LeaseLostError, UnreachableError, type Locks } from '../../src/index.js';
import { uniquePrefix } from '../helpers/harness.js';
import { freePort, RedisServer } from '../helpers/redis-server.js';

/** How long a release of a lease known lost waits for the give-back of its key at most, ms (src/lease/lease.ts). */
const GIVE_BACK_WAIT = 250;

/** How long past its bound a call may take to settle here (a loaded machine), ms. */
const SLACK = 600;

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((c) => c().catch(() => {})));
});

/** Runs `call` and resolves to its error and how long it took to settle, ms. */
async function settled(call: () => Promise<unknown>): Promise<{ error: unknown; ms: number }> {
  const t = performance.now();
  const error = await call().then(
    () => undefined,
    (e: unknown) => e,
  );
  return { error, ms: performance.now() - t };
}

/** A TCP server that accepts connections and never answers: a Redis that hangs. */
async function blackHole(): Promise<{ port: number; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    port,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function track(locks: Locks): Locks {
  cleanups.push(() => locks.close());
  return locks;
}

describe('an unreachable server', () => {
  const cases: { name: string; make: () => Promise<{ locks: Locks; server: string }> }[] = [
    {
      name: 'a refused port, through url',
      make: async () => {
        const port = await freePort();
        return { locks: track(createLocks({ url: `redis://127.0.0.1:${port}` })), server: `127.0.0.1:${port}` };
      },
    },
    {
      name: 'a refused port, the user\'s ioredis client at its defaults',
      make: async () => {
        const port = await freePort();
        const client = new Redis(port, '127.0.0.1');
        client.on('error', () => {});
        cleanups.push(async () => client.disconnect());
        return { locks: track(createLocks({ redis: client })), server: `127.0.0.1:${port}` };
      },
    },
    {
      name: 'a server that accepts connections and never answers, through url',
      make: async () => {
        const hole = await blackHole();
        cleanups.push(hole.close);
        return { locks: track(createLocks({ url: `redis://127.0.0.1:${hole.port}` })), server: `127.0.0.1:${hole.port}` };
      },
    },
    {
      name: 'a server that accepts connections and never answers, the user\'s ioredis client at its defaults',
      make: async () => {
        const hole = await blackHole();
        cleanups.push(hole.close);
        const client = new Redis(hole.port, '127.0.0.1');
        client.on('error', () => {});
        cleanups.push(async () => client.disconnect());
        return { locks: track(createLocks({ redis: client })), server: `127.0.0.1:${hole.port}` };
      },
    },
  ];

  for (const c of cases) {
    it(`${c.name}: acquire rejects within its wait with UNREACHABLE naming the server`, async () => {
      const { locks, server } = await c.make();
      const { error, ms } = await settled(() => locks.acquire('k', { wait: 500 }));
      expect(error).toBeInstanceOf(UnreachableError);
      expect(error).toMatchObject({ code: 'UNREACHABLE', server });
      expect((error as Error).message).toContain(server);
      expect((error as Error).message).not.toMatch(/held by another owner/);
      expect(ms).toBeLessThan(500 + 250 + SLACK);
    });

    it(`${c.name}: tryAcquire rejects within min(ttl, 2 s) with UNREACHABLE`, async () => {
      const { locks, server } = await c.make();
      const { error, ms } = await settled(() => locks.tryAcquire('k', { ttl: 1000 }));
      expect(error).toMatchObject({ code: 'UNREACHABLE', server });
      expect(ms).toBeLessThan(1000 + 250 + SLACK);
    });
  }
});

describe('a server that goes away while a lease is held', () => {
  let server: RedisServer | undefined;
  afterAll(async () => server?.stop());

  const clients: { name: string; make: (s: RedisServer) => Promise<Locks> }[] = [
    {
      name: 'ioredis at its defaults',
      make: async (s) => {
        const client = new Redis(s.port, '127.0.0.1');
        client.on('error', () => {});
        cleanups.push(async () => client.disconnect());
        return track(createLocks({ redis: client, prefix: uniquePrefix() }));
      },
    },
    {
      name: 'node-redis at its defaults',
      make: async (s) => {
        const client = createClient({ url: s.url });
        client.on('error', () => {});
        await client.connect();
        cleanups.push(async () => client.destroy());
        return track(createLocks({ redis: client, prefix: uniquePrefix() }));
      },
    },
  ];

  for (const c of clients) {
    it(`${c.name}: withLock rejects with LEASE_LOST within the TTL plus a bound once the server is killed`, async () => {
      server = await RedisServer.start();
      const locks = await c.make(server);
      const ttl = 1000;
      let killed = 0;
      const { error, ms } = await settled(() =>
        locks.withLock('k', { ttl }, async (lease) => {
          await server!.kill();
          killed = performance.now();
          // The work stops when the lease is lost, as the signal says.
          await new Promise((resolve) => lease.signal.addEventListener('abort', resolve, { once: true }));
        }),
      );
      expect(error).toBeInstanceOf(LeaseLostError);
      expect(error).toMatchObject({ code: 'LEASE_LOST', reason: 'unreachable' });
      expect(performance.now() - killed).toBeLessThan(ttl + SLACK);
      expect(ms).toBeLessThan(ttl + 2 * SLACK);
      server = undefined;
    });

    it(`${c.name}: release of a held lease settles within its validity, and of a lease known lost at once (within the give-back wait)`, async () => {
      server = await RedisServer.start();
      const locks = await c.make(server);
      const lease = await locks.acquire('k', { ttl: 800 });
      await server.kill();
      server = undefined;
      // ioredis queues the release and gets no reply: the lease is lost when its validity ends.
      // node-redis fails it at once (its socket closed): a BackendError, and the lease stays to expire.
      const first = await settled(() => lease.release());
      expect(first.ms).toBeLessThan(800 + SLACK);
      if (first.error instanceof LeaseLostError) expect(first.error).toMatchObject({ reason: 'unreachable' });
      else expect(first.error).toMatchObject({ code: 'BACKEND_ERROR', operation: 'release' });
      // Once the lease is known lost, a release rejects with that loss at once.
      if (!lease.signal.aborted) await new Promise((resolve) => lease.signal.addEventListener('abort', resolve, { once: true }));
      const again = await settled(() => lease.release());
      expect(again.error).toBe(lease.lostError);
      expect(again.error).toBeInstanceOf(LeaseLostError);
      expect(again.ms).toBeLessThan(GIVE_BACK_WAIT + 100);
    });
  }

  it('a server that comes back after the lease was lost: nothing acts late, the key is given back', async () => {
    server = await RedisServer.start();
    const raw = new Redis(server.port, '127.0.0.1');
    cleanups.push(async () => raw.disconnect());
    const prefix = uniquePrefix();
    const locks = track(createLocks({ redis: new Redis(server.port, '127.0.0.1'), prefix }));
    const lease = await locks.acquire('back', { ttl: 600 });
    // Frozen (no reply, no expiry) for longer than the TTL, then back.
    await raw.call('CLIENT', 'PAUSE', '1200', 'ALL');
    const { error, ms } = await settled(() => lease.release());
    expect(error).toMatchObject({ code: 'LEASE_LOST', reason: 'unreachable' });
    expect(ms).toBeLessThan(600 + SLACK);
    // When Redis runs the release (compare-and-delete with our token), the key goes; a new caller gets the lock.
    const other = track(createLocks({ redis: new Redis(server.port, '127.0.0.1'), prefix }));
    const next = await other.acquire('back', { wait: 3000 });
    expect(next.fence).toBeGreaterThan(lease.fence);
    await next.release();
  });
});
