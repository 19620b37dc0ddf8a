/**
 * A node-redis cluster client resubscribes a dropped node's channels from a listener of its own
 * internal event without waiting for the calls: mid-failover one rejects and nobody can catch it
 * (an unhandled rejection: the end of a Node process by default). On the subscriber latchkey owns,
 * catchResubscribes puts a listener in its place that makes the same calls and catches them.
 * An unhandled rejection fails a vitest run: without the replacement, the first test fails so.
 */
import { createClient, createCluster } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { catchResubscribes, RESUBSCRIBE_EVENT, type ResubscribingCluster } from '../../src/client/node-redis-resubscribe.js';
import { RedisCluster } from '../helpers/redis-cluster.js';
import { RedisServer } from '../helpers/redis-server.js';

let cluster: RedisCluster;
beforeAll(async () => {
  cluster = await RedisCluster.start({ masters: 3 });
});
afterAll(async () => cluster?.stop());

/**
 * A connected node-redis 6 cluster client, how many times its sSubscribe was called, and (with
 * `keep`) the calls' promises: kept only where a rejection is not what is tested, since a handler
 * on them would handle it.
 */
async function clusterClient(keep = false) {
  const client = createCluster({ rootNodes: cluster.rootNodes });
  client.on('error', () => {});
  await client.connect();
  let calls = 0;
  const kept: Promise<unknown>[] = [];
  const sSubscribe = client.sSubscribe;
  (client as unknown as { sSubscribe: unknown }).sSubscribe = function (this: unknown, ...args: Parameters<typeof sSubscribe>) {
    calls++;
    const call = (sSubscribe as (...a: unknown[]) => Promise<unknown>).apply(this, args);
    if (keep) kept.push(call);
    return call;
  };
  return { client, calls: () => calls, kept };
}

const sharded = (channel: string, listener: (message: string) => void) => ({
  SHARDED: new Map([[channel, { strings: new Set([listener]), buffers: new Set() }]]),
});

describe("node-redis cluster: its own resubscribes on latchkey's subscriber", () => {
  it('a resubscribe that rejects (the client cannot reach the channel’s shard) is caught: no unhandled rejection', async () => {
    const { client, calls } = await clusterClient();
    expect(catchResubscribes(client as unknown as ResubscribingCluster)).toBe(true);
    await client.close(); // every call from now on rejects, as one does mid-failover
    client.emit(RESUBSCRIBE_EVENT, sharded('latchkey:test:resubscribe', () => {}));
    expect(calls()).toBe(1);
    // Node reports a rejection nobody handled once the microtasks after a turn have run: two turns.
    for (let turn = 0; turn < 2; turn++) await new Promise((resolve) => setImmediate(resolve));
    // The call the listener made was one that rejects.
    await expect(client.sSubscribe('latchkey:test:resubscribe', () => {})).rejects.toThrow();
  });

  it('the dropped channels are subscribed again: a message published afterwards reaches the listener', async () => {
    const { client, calls, kept } = await clusterClient(true);
    const publisher = createCluster({ rootNodes: cluster.rootNodes });
    publisher.on('error', () => {});
    await publisher.connect();
    try {
      expect(catchResubscribes(client as unknown as ResubscribingCluster)).toBe(true);
      const channel = 'latchkey:test:resubscribed';
      const heard = new Promise<string>((resolve) => client.emit(RESUBSCRIBE_EVENT, sharded(channel, resolve)));
      expect(calls()).toBe(1);
      await Promise.all(kept); // subscribed
      await publisher.sPublish(channel, 'grant');
      expect(await heard).toBe('grant');
    } finally {
      await Promise.all([client.close(), publisher.close()]);
    }
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
