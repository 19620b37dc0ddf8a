/**
 * A Cluster inbox following the topology (src/backend/inbox-topology.ts, openLockInbox), with a
 * fake subscriber connection and a fake SHARDNUMSUB probe: no Redis.
 */
import { describe, expect, it } from 'vitest';
import type { ScriptClient, SubscriberConnection } from '../../src/client/script-client.js';
import { openLockInbox } from '../../src/backend/inbox.js';
import { followTopology, type FollowedChannel } from '../../src/backend/inbox-topology.js';
import { lockKeys } from '../../src/keys.js';

const keys = lockKeys('t:', 'job');
const channel = `${keys.lock}:inbox:m1`;

/** Resolves once `ok()` holds (polled on timers: the code under test runs on promises and timers). */
async function until(ok: () => boolean, ms = 2000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 2));
  }
}

/**
 * A fake cluster: which channels the master of their slot hears, and the subscriber's calls.
 * `resubscribe`: what the subscriber's resubscribe does instead (after recording the call).
 */
function fakeCluster(resubscribe?: (channel: string) => Promise<void>) {
  const heard = new Set<string>();
  const calls: string[] = [];
  let topology: (() => void) | undefined;
  let reconnect: (() => void) | undefined;
  const connection: SubscriberConnection = {
    subscribe: async (c) => {
      calls.push(`subscribe ${c}`);
      heard.add(c);
    },
    unsubscribe: async (c) => {
      calls.push(`unsubscribe ${c}`);
      heard.delete(c);
    },
    onMessage: () => {},
    onReconnect: (l) => (reconnect = l),
    onTopologyChange: (l) => (topology = l),
    refreshTopology: () => calls.push('refresh'),
    resubscribe: async (c) => {
      calls.push(`resubscribe ${c}`);
      if (resubscribe) return resubscribe(c);
      if (!calls.includes('stale')) heard.add(c);
    },
    close: async () => {},
  };
  const client = {
    cluster: true,
    createSubscriber: async () => connection,
    evalsha: async (_sha: string, _keys: readonly string[], args: readonly string[]) => (heard.has(args[0]!) ? 1 : 0),
    eval: async () => 0,
  } as unknown as ScriptClient;
  return { heard, calls, client, moved: () => topology?.(), reconnected: () => reconnect?.() };
}

describe('a Cluster inbox following the topology', () => {
  it('stops reporting itself listening when the master lost its subscription, subscribes again, and wakes every waiter once heard', async () => {
    const fake = fakeCluster();
    let woken = 0;
    const inbox = await openLockInbox(fake.client, 'm1', (member) => member === undefined && woken++);
    try {
      await inbox.join(keys);
      expect(inbox.listening(keys)).toBe(true);
      // A failover: the demoted master dropped the subscription and the client has not moved it.
      fake.heard.delete(channel);
      fake.calls.push('stale');
      fake.moved();
      await until(() => !inbox.listening(keys));
      // A join meanwhile waits until the channel is heard again.
      let joined = false;
      void inbox.join(keys).then(() => (joined = true));
      await until(() => fake.calls.filter((c) => c.startsWith('resubscribe')).length >= 2);
      expect(joined).toBe(false);
      expect(woken).toBe(0);
      expect(fake.calls).toContain('refresh');
      // The client's slots are fresh again: the next resubscribe reaches the new master.
      fake.calls.splice(fake.calls.indexOf('stale'), 1);
      await until(() => inbox.listening(keys));
      await until(() => joined && woken === 1);
      inbox.leave(keys);
      inbox.leave(keys);
    } finally {
      await inbox.close();
    }
  });

  it('a check that finds every channel heard wakes nobody (a topology event or an audit alike)', async () => {
    const heard = new Set([channel]);
    const entry: FollowedChannel = { keys, count: 1, subscribed: true, ready: true };
    let recovered = 0;
    let probes = 0;
    const follow = followTopology(
      {
        channels: () => [[channel, entry]],
        probe: async (_k, c) => (probes++, heard.has(c) ? 1 : 0),
        resubscribe: async (c) => void heard.add(c),
        refresh: () => {},
        recovered: () => recovered++,
      },
      20,
    );
    try {
      follow.arm(); // as an inbox does when a channel gets its first waiter
      await until(() => probes >= 2); // audits
      follow.check();
      await until(() => probes >= 4);
      expect(recovered).toBe(0);
      heard.delete(channel);
      follow.check();
      await until(() => recovered === 1);
      expect(entry.ready).toBe(true);
    } finally {
      follow.close();
    }
  });

  it('an audit that finds a channel unheard (no event reported it) recovers it', async () => {
    const fake = fakeCluster();
    let woken = 0;
    const inbox = await openLockInbox(fake.client, 'm1', (member) => member === undefined && woken++, 20);
    try {
      await inbox.join(keys);
      fake.heard.delete(channel);
      await until(() => woken === 1);
      expect(inbox.listening(keys)).toBe(true);
      expect(fake.calls).toContain(`resubscribe ${channel}`);
    } finally {
      await inbox.close();
    }
  });

  it('a channel left while it is being recovered is not subscribed again', async () => {
    const fake = fakeCluster();
    const inbox = await openLockInbox(fake.client, 'm1', () => {});
    try {
      await inbox.join(keys);
      fake.heard.delete(channel);
      fake.calls.push('stale');
      fake.moved();
      await until(() => !inbox.listening(keys));
      inbox.leave(keys);
      await until(() => fake.calls.includes(`unsubscribe ${channel}`));
      const resubscribes = fake.calls.filter((c) => c.startsWith('resubscribe')).length;
      await new Promise((r) => setTimeout(r, 100));
      expect(fake.calls.filter((c) => c.startsWith('resubscribe')).length).toBe(resubscribes);
    } finally {
      await inbox.close();
    }
  });

  it('a resubscribe the client never answers does not stop the recovery: the channel is probed again on latchkey\'s clock, and nothing more is sent for it meanwhile', async () => {
    // A client may leave a call unanswered while its view of the cluster is stale (ioredis 5, an
    // SSUBSCRIBE sent to another shard's node): the check waited for it, and the inbox's waiters
    // for their recheck. (CI once: none of three ioredis 5 waiters served within 20 s of a reshard.)
    const fake = fakeCluster(() => new Promise<void>(() => {}));
    let woken = 0;
    const inbox = await openLockInbox(fake.client, 'm1', (member) => member === undefined && woken++);
    try {
      await inbox.join(keys);
      fake.heard.delete(channel);
      fake.moved();
      await until(() => fake.calls.includes(`resubscribe ${channel}`));
      // The server did subscribe it; the client never says so.
      fake.heard.add(channel);
      await until(() => woken === 1, 3000);
      expect(inbox.listening(keys)).toBe(true);
      expect(fake.calls.filter((c) => c === `resubscribe ${channel}`)).toHaveLength(1);
    } finally {
      await inbox.close();
    }
  });
});
