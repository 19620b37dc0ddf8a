/**
 * A Redis that is down or does not answer (issue 18), through one client as a user makes it (its
 * defaults: ioredis retries 20 times per request, node-redis queues offline commands for ever):
 * every call settles on latchkey's own clock and an unreachable server is reported as
 * unreachable (UnreachableError, code UNREACHABLE, naming the server and, when the client reported
 * one, its connection error), never as a lock held by another owner. Each test file runs it for
 * the clients of one family, so that the files run in parallel.
 */
import { createServer, type Server, type Socket } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { BackendError, createLocks, LeaseLostError, UnreachableError, type Locks, type LocksOptions } from '../../src/index.js';
import { CALL_BOUND } from '../../src/manager/bounded-call.js';
import { uniquePrefix } from './harness.js';
import { freePort, RedisServer } from './redis-server.js';

/** How long a release of a lease known lost waits for the give-back of its key at most, ms (src/lease/lease.ts). */
export const GIVE_BACK_WAIT = 250;

/** How long past its bound a call may take to settle here (a loaded machine), ms. */
export const SLACK = 600;

/** The attempt grace: how long past its wait an acquire may wait for a reply in flight, ms (src/wait/attempt.ts). */
const ATTEMPT_GRACE = 250;

/** A client as its user makes it, with its error listener, and how to drop it. */
export interface DownClient {
  /** For test names. */
  readonly label: string;
  /**
   * The manager's connection options for a server on `port`: `{ redis: client }` made at the
   * client's defaults (a node-redis client's connect() is called, not awaited, as the server may be
   * down), or `{ url }`. `drop` is called after the test.
   */
  make(port: number): Promise<{ options: Pick<LocksOptions, 'redis' | 'url'>; drop: () => Promise<unknown> }>;
  /** Whether the client connects before it can be handed to latchkey (GLIDE): then no manager exists for a server that is down. */
  readonly connectsFirst?: boolean;
  /** Whether the client fails a command that got no reply within a timeout of its own (GLIDE's requestTimeout, 250 ms by default). */
  readonly requestTimeout?: boolean;
  /** Whether a connection refused is reported as the cause (the client reports its connection errors to a listener). */
  readonly reportsRefusal: boolean;
}

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
export async function blackHole(): Promise<{ port: number; close: () => Promise<void> }> {
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

const untilAborted = (signal: AbortSignal): Promise<unknown> =>
  signal.aborted ? Promise.resolve() : new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));

export function redisDownSuite(client: DownClient): void {
  const cleanups: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    await Promise.all(cleanups.splice(0).map((c) => c().catch(() => {})));
  });

  const managerOn = async (port: number, prefix?: string): Promise<Locks> => {
    const { options, drop } = await client.make(port);
    const locks = createLocks({ ...options, ...(prefix === undefined ? {} : { prefix }) });
    cleanups.push(async () => {
      await locks.close().catch(() => {});
      await drop();
    });
    return locks;
  };

  if (!client.connectsFirst) {
    describe(`${client.label}: an unreachable server`, () => {
      const targets = [
        { name: 'a refused port', open: async () => ({ port: await freePort(), cause: client.reportsRefusal ? /ECONNREFUSED/ : /no reply/ }) },
        {
          name: 'a port that accepts the connection and never answers',
          open: async () => {
            const hole = await blackHole();
            cleanups.push(hole.close);
            return { port: hole.port, cause: /no reply/ };
          },
        },
      ];
      for (const target of targets) {
        it(`${target.name}: acquire rejects within its wait with UNREACHABLE naming the server and the cause`, async () => {
          const { port, cause } = await target.open();
          const locks = await managerOn(port);
          const { error, ms } = await settled(() => locks.acquire('k', { wait: 500 }));
          expect(error).toBeInstanceOf(UnreachableError);
          expect(error).toMatchObject({ code: 'UNREACHABLE', server: `127.0.0.1:${port}` });
          expect((error as Error).message).toContain(`127.0.0.1:${port}`);
          expect((error as Error).message).toMatch(cause);
          expect((error as Error).message).not.toMatch(/held by another owner/);
          expect(ms).toBeLessThan(500 + ATTEMPT_GRACE + SLACK);
        });

        // On the black hole only: against a refused port the calls wait on the same bound, or the client fails them first.
        if (target.name.startsWith('a port that accepts')) it(`${target.name}: inspect, list, forceRelease, fencedWrite and fencedRead reject within 5 s with UNREACHABLE`, async () => {
          const { port } = await target.open();
          const locks = await managerOn(port);
          const calls = [() => locks.inspect('k'), () => locks.list(), () => locks.forceRelease('k'), () => locks.fencedWrite('r', 'v', 1), () => locks.fencedRead('r')];
          for (const { error, ms } of await Promise.all(calls.map(settled))) {
            expect(ms).toBeLessThan(CALL_BOUND + SLACK);
            if (error instanceof UnreachableError) {
              expect(error).toMatchObject({ code: 'UNREACHABLE', server: `127.0.0.1:${port}` });
            } else {
              // Or the client failed the call first (node-redis, whose connection was refused): its error, said.
              expect(error).toBeInstanceOf(BackendError);
              expect((error as Error).message).toMatch(client.reportsRefusal ? /ECONNREFUSED|closed/i : /./);
            }
          }
        });

        it(`${target.name}: tryAcquire rejects within min(ttl, 2 s) with UNREACHABLE naming the cause`, async () => {
          const { port, cause } = await target.open();
          const locks = await managerOn(port);
          const { error, ms } = await settled(() => locks.tryAcquire('k', { ttl: 700 }));
          expect(error).toMatchObject({ code: 'UNREACHABLE', server: `127.0.0.1:${port}` });
          expect((error as Error).message).toMatch(cause);
          expect(ms).toBeLessThan(700 + SLACK);
        });
      }
    });
  }

  describe(`${client.label}: a server that goes away while a lease is held`, () => {
    let server: RedisServer | undefined;
    afterEach(async () => {
      await server?.stop();
      server = undefined;
    });
    afterAll(async () => server?.stop());

    it('withLock rejects with LEASE_LOST (unreachable, naming the server) within the TTL plus a bound once the server is killed', async () => {
      server = await RedisServer.start();
      const locks = await managerOn(server.port, uniquePrefix());
      const ttl = 800;
      let killed = 0;
      const { error, ms } = await settled(() =>
        locks.withLock('k', { ttl }, async (lease) => {
          await server!.kill();
          killed = performance.now();
          await untilAborted(lease.signal); // the work stops when the lease is lost, as the signal says
        }),
      );
      expect(error).toBeInstanceOf(LeaseLostError);
      expect(error).toMatchObject({ code: 'LEASE_LOST', reason: 'unreachable' });
      expect((error as Error).message).toContain(`127.0.0.1:${server.port}`);
      expect(performance.now() - killed).toBeLessThan(ttl + SLACK);
      expect(ms).toBeLessThan(ttl + 2 * SLACK);
    });

    it('release of a held lease settles within its validity, and of a lease known lost at once', async () => {
      server = await RedisServer.start();
      const locks = await managerOn(server.port, uniquePrefix());
      const lease = await locks.acquire('k', { ttl: 700 });
      await server.kill();
      // A client that queues the release gets no reply: the lease is lost when its validity ends.
      // A client that fails it at once (its socket closed) gives a BackendError naming the release; the key expires.
      const first = await settled(() => lease.release());
      expect(first.ms).toBeLessThan(700 + SLACK);
      if (first.error instanceof LeaseLostError) expect(first.error).toMatchObject({ reason: 'unreachable' });
      else expect(first.error).toMatchObject({ code: 'BACKEND_ERROR', operation: 'release' });
      await untilAborted(lease.signal);
      const again = await settled(() => lease.release());
      expect(again.error).toBe(lease.lostError);
      expect(again.error).toBeInstanceOf(LeaseLostError);
      expect(again.ms).toBeLessThan(GIVE_BACK_WAIT + 100);
    });

    it('a server that comes back after the lease was lost: nothing acts late, the key is given back', async () => {
      server = await RedisServer.start();
      const raw = new Redis(server.port, '127.0.0.1');
      cleanups.push(async () => raw.disconnect());
      const prefix = uniquePrefix();
      const locks = await managerOn(server.port, prefix);
      const lease = await locks.acquire('back', { ttl: 500 });
      // Frozen (no reply, no expiry) for longer than the TTL, then back.
      await raw.call('CLIENT', 'PAUSE', '1100', 'ALL');
      const { error, ms } = await settled(() => lease.release());
      // Lost when its validity ends; a client with a request timeout of its own (GLIDE: 250 ms)
      // fails the release before that, with an unknown outcome: a BackendError naming the release.
      if (client.requestTimeout) expect(error).toMatchObject({ code: 'BACKEND_ERROR', operation: 'release' });
      else expect(error).toMatchObject({ code: 'LEASE_LOST', reason: 'unreachable' });
      expect(ms).toBeLessThan(500 + SLACK);
      // Redis runs the queued release when it resumes: a compare-and-delete with the first lease's
      // token, which the key no longer holds once it expired. A new caller gets the lock, and the
      // late release does not take it from them.
      const other = await managerOn(server.port, prefix);
      const next = await other.acquire('back', { wait: 3000 });
      expect(next.fence).toBeGreaterThan(lease.fence);
      // Asked on the first manager's connection: its late release has run before this.
      expect(await locks.inspect('back')).toMatchObject({ held: true });
      expect(next.signal.aborted).toBe(false);
      await next.release();
      expect(await raw.exists(`${prefix}{back}`)).toBe(0);
    });
  });
}
