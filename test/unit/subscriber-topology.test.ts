/**
 * What the cluster adapters' subscriber connections tell the inbox about a moving topology, and
 * how they subscribe again, with fake clients (no Redis): ioredis `Cluster` events and
 * `refreshSlotsCache`, node-redis cluster events, `_slots.rediscover` and its leave-then-join.
 */
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { ioredisAdapter, type IoredisLike } from '../../src/client/ioredis-adapter.js';
import { nodeRedisAdapter, type NodeRedisLike } from '../../src/client/node-redis-adapter.js';

function fakeIoredisCluster(calls: string[]): IoredisLike {
  const sub = Object.assign(new EventEmitter(), {
    isCluster: true,
    ssubscribe: async (c: string) => calls.push(`ssubscribe ${c}`),
    sunsubscribe: async (c: string) => calls.push(`sunsubscribe ${c}`),
    refreshSlotsCache: () => calls.push('refreshSlotsCache'),
    quit: async () => {},
    disconnect: () => {},
  });
  return Object.assign(new EventEmitter(), {
    isCluster: true,
    evalsha: async () => 0,
    eval: async () => 0,
    defineCommand: () => {},
    call: async () => 0,
    duplicate: (_nodes: unknown, options: { shardedSubscribers?: boolean }) => {
      calls.push(`duplicate shardedSubscribers=${String(options.shardedSubscribers)}`);
      return sub;
    },
    quit: async () => {},
    disconnect: () => {},
  }) as unknown as IoredisLike;
}

describe('cluster subscribers and a moving topology', () => {
  it('ioredis: slot refreshes, node changes and moved subscribers are topology changes; it refreshes its slots and sends SSUBSCRIBE again', async () => {
    const calls: string[] = [];
    const client = fakeIoredisCluster(calls);
    const connection = await ioredisAdapter(client, false).createSubscriber();
    const sub = (client.duplicate as unknown as (n: unknown, o: object) => EventEmitter)(undefined, {});
    let changes = 0;
    connection.onTopologyChange!(() => changes++);
    for (const event of ['refresh', '+node', '-node', 'subscribersReady']) sub.emit(event);
    expect(changes).toBe(4);
    connection.refreshTopology!();
    await connection.resubscribe!('{a}:inbox:m');
    expect(calls).toContain('refreshSlotsCache');
    expect(calls).toContain('ssubscribe {a}:inbox:m');
  });

  it('node-redis: node clients made ready or dropped are topology changes; it rediscovers the slots, and leaves a channel before joining it again', async () => {
    const calls: string[] = [];
    const nodeClient = { options: {} };
    const sub = Object.assign(new EventEmitter(), {
      getSlotMaster: () => undefined,
      connect: async () => {},
      sSubscribe: async (c: string) => calls.push(`sSubscribe ${c}`),
      sUnsubscribe: async (c: string) => calls.push(`sUnsubscribe ${c}`),
      close: async () => {},
      _slots: {
        masters: [{ client: nodeClient }],
        rediscover: async (startWith: unknown) => calls.push(`rediscover ${startWith === nodeClient ? 'from a node' : 'from none'}`),
      },
    });
    const client = Object.assign(new EventEmitter(), {
      getSlotMaster: () => undefined,
      evalSha: async () => 0,
      eval: async () => 0,
      sendCommand: async () => 0,
      duplicate: () => sub,
      connect: async () => {},
    }) as unknown as NodeRedisLike;
    const connection = await nodeRedisAdapter(client, false).createSubscriber();
    let changes = 0;
    connection.onTopologyChange!(() => changes++);
    for (const event of ['node-ready', 'node-disconnect', 'sharded-channel-moved-error']) sub.emit(event);
    expect(changes).toBe(3);
    connection.refreshTopology!();
    await connection.resubscribe!('{a}:inbox:m'); // not subscribed: nothing
    await connection.subscribe('{a}:inbox:m');
    await connection.resubscribe!('{a}:inbox:m');
    expect(calls).toEqual(['rediscover from a node', 'sSubscribe {a}:inbox:m', 'sUnsubscribe {a}:inbox:m', 'sSubscribe {a}:inbox:m']);
  });
});
