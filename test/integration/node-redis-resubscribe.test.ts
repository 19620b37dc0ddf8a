/**
 * A node-redis cluster client resubscribes a dropped node's channels from a listener of its own
 * internal event without waiting for the calls: mid-failover one rejects and nobody can catch it
 * (an unhandled rejection: the end of a Node process by default). On the subscriber latchkey owns
 * (a `duplicate()` of the user's cluster client), catchResubscribes puts a listener in its place
 * that makes the same calls and catches them. An unhandled rejection fails a vitest run: with
 * node-redis's listener left in place, the first test fails so.
 */
import { createClient, createCluster } from 'redis';
import { createCluster as createCluster5 } from 'redis5';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { catchResubscribes, RESUBSCRIBE_EVENT, type ResubscribingCluster } from '../../src/client/node-redis-resubscribe.js';
import { RedisCluster } from '../helpers/redis-cluster.js';
import { RedisServer } from '../helpers/redis-server.js';

/** The parts of a node-redis cluster client (5 or 6) these tests use. */
interface ClusterClient {
  on(event: string, listener: (...args: never[]) => void): unknown;
  connect(): Promise<unknown>;
  close(): Promise<unknown>;
  duplicate(): ClusterClient;
  emit(event: string, ...args: unknown[]): boolean;
  sSubscribe(channel: string, listener: (message: string) => void): Promise<unknown>;
  sPublish(channel: string, message: string): Promise<unknown>;
}

const MAJORS: Array<[string, (rootNodes: Array<{ url: string }>) => ClusterClient]> = [
  ['node-redis 6', (rootNodes) => createCluster({ rootNodes }) as unknown as ClusterClient],
  ['node-redis 5', (rootNodes) => createCluster5({ rootNodes }) as unknown as ClusterClient],
];

let cluster: RedisCluster;
beforeAll(async () => {
  cluster = await RedisCluster.start({ masters: 3 });
});
afterAll(async () => cluster?.stop());

/**
 * A connected subscriber made as latchkey makes its own (`duplicate()` of the user's client), how
 * many times its sSubscribe was called, and (with `keep`) the calls' promises: kept only where a
 * rejection is not what is tested, since a handler on them would handle it.
 */
async function subscriber(user: ClusterClient, keep = false) {
  const client = user.duplicate();
  client.on('error', () => {});
  await client.connect();
  let calls = 0;
  const kept: Promise<unknown>[] = [];
  const sSubscribe = client.sSubscribe;
  client.sSubscribe = function (this: unknown, ...args: Parameters<typeof sSubscribe>) {
    calls++;
    const call = sSubscribe.apply(this, args);
    if (keep) kept.push(call);
    return call;
  };
  return { client, calls: () => calls, kept };
}

type Listener = (message: string | Buffer) => void;
const sharded = (channel: string, strings: Listener[], buffers: Listener[] = []) => ({
  SHARDED: new Map([[channel, { strings: new Set(strings), buffers: new Set(buffers) }]]),
});

for (const [major, connect] of MAJORS)
describe(`${major} cluster: its own resubscribes on latchkey's subscriber`, () => {
  let user: ClusterClient;
  beforeAll(async () => {
    user = connect(cluster.rootNodes);
    user.on('error', () => {});
    await user.connect();
  });
  afterAll(async () => user?.close());

  it('a resubscribe that rejects (the client cannot reach the channel’s shard) is caught: no unhandled rejection', async () => {
    const { client, calls } = await subscriber(user);
    expect(catchResubscribes(client as unknown as ResubscribingCluster)).toBe(true);
    await client.close(); // every call from now on rejects, as one does mid-failover
    client.emit(RESUBSCRIBE_EVENT, sharded('latchkey:test:resubscribe', [() => {}]));
    expect(calls()).toBe(1);
    // Node reports a rejection nobody handled once the microtasks after a turn have run: two turns.
    for (let turn = 0; turn < 2; turn++) await new Promise((resolve) => setImmediate(resolve));
    // The call the listener made was one that rejects.
    await expect(client.sSubscribe('latchkey:test:resubscribe', () => {})).rejects.toThrow();
  });

  it('the dropped channels are subscribed again, string and buffer listeners alike: a message published afterwards reaches both', async () => {
    const { client, calls, kept } = await subscriber(user, true);
    try {
      expect(catchResubscribes(client as unknown as ResubscribingCluster)).toBe(true);
      const channel = 'latchkey:test:resubscribed';
      let asString!: (message: string | Buffer) => void;
      let asBuffer!: (message: string | Buffer) => void;
      const heard = Promise.all([new Promise<string | Buffer>((r) => (asString = r)), new Promise<string | Buffer>((r) => (asBuffer = r))]);
      client.emit(RESUBSCRIBE_EVENT, sharded(channel, [asString], [asBuffer]));
      expect(calls()).toBe(2);
      await Promise.all(kept); // subscribed
      await user.sPublish(channel, 'grant');
      const [text, bytes] = await heard;
      expect(text).toBe('grant');
      expect(Buffer.isBuffer(bytes) && bytes.toString()).toBe('grant');
    } finally {
      await client.close();
    }
  });

  it("replaces the listener node-redis's own emit reaches, also on the object createCluster wraps around the client", async () => {
    const wrapped = connect(cluster.rootNodes); // not connected, no other listener on it
    const inner = Object.getPrototypeOf(wrapped) as { listeners(event: string): unknown[] };
    const original = inner.listeners(RESUBSCRIBE_EVENT);
    expect(original).toHaveLength(1);
    expect(catchResubscribes(wrapped as unknown as ResubscribingCluster)).toBe(true);
    const now = inner.listeners(RESUBSCRIBE_EVENT);
    expect(now).toHaveLength(1);
    expect(now[0]).not.toBe(original[0]);
  });

  it('leaves a client without that internal listener as it is (a standalone client)', async () => {
    const server = await RedisServer.start();
    const client = createClient({ url: server.url });
    client.on('error', () => {});
    await client.connect();
    try {
      expect(catchResubscribes(client as unknown as ResubscribingCluster)).toBe(false);
    } finally {
      await client.close();
      await server.stop();
    }
  });
});
