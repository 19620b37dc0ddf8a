import { QuorumError, UnsupportedError } from '../errors.js';
import type { LockKeys } from '../keys.js';
import type { AcquireReply, Backend, LockSnapshot, OwnershipReply, ReleaseReply } from './backend.js';
import { quorumOf, tally, type NodeVote } from './quorum.js';
import { fanOut, NodeHungError, type Answer } from './redlock-fan-out.js';
import { FenceFloors } from './redlock-fence-floors.js';
import { watchEveryInbox } from './redlock-inbox.js';
import { LateReplies } from './redlock-late-replies.js';
import { agreedFence, decide, holderTtl, isOk, namedHolder, retryAfter, voteOf } from './redlock-votes.js';
import type { RedisBackend } from './redis-backend.js';
import { acquireCall } from './redis-calls.js';

export interface RedlockSettings {
  /** Longest wait for one node's reply, ms; `undefined`: a tenth of the TTL, between 10 and 100 ms. */
  readonly nodeTimeout: number | undefined;
}

/**
 * Redlock over N independent Redis masters. Every operation goes to all nodes at once, each with
 * a timeout far shorter than the TTL; a majority decides. Each node runs the single-Redis scripts
 * (in wake mode: a node cannot grant a lock that needs a majority).
 *
 * Fences: each node counts its own. An acquire that won a majority takes the highest fence among
 * its voters and raises the other voters' counters to it before the lease is handed out, so any
 * later majority (which shares a node with this one) issues a higher fence. Every node is offered
 * the same floor, the highest fence this backend has seen issued for the lock plus 1 (never a
 * clock of this machine: see acquire.lua), so when the voters' counters agree, which is the
 * steady state, they all issue the same fence, a majority is already at it, and the raise
 * sends nothing: an acquire is one round trip, as on one Redis.
 */
export function redlockBackend(nodes: readonly RedisBackend[], settings: RedlockSettings): Backend {
  const quorum = quorumOf(nodes.length);
  const timeoutFor = (ttl: number): number =>
    settings.nodeTimeout ?? Math.max(10, Math.min(100, Math.floor(ttl / 10)));
  /** Calls every node with one deadline (see fanOut); a node that hung is waited for once per hang. */
  const each = fanOut(nodes, quorum);
  /** Tokens in flight and leases held: what decides about an acquire reply that came late. */
  const lateReplies = new LateReplies();
  /** Per lock, the highest fence seen: the floor the next acquire offers every node. */
  const floors = new FenceFloors();
  /** Per token, the nodes that confirmed a release that ended in a QuorumError: a retry counts them. */
  const releasedOn = new Map<string, Set<number>>();

  const releaseEverywhere = (keys: LockKeys, token: string): void => {
    lateReplies.forget(token);
    const sent = lateReplies.inFlight(token);
    nodes.forEach((node, index) => {
      lateReplies.releaseSent(sent, index);
      each.sendOne(index, () => node.release(keys, token));
    });
  };

  /**
   * Lifts the counters of the voters that issued less than `fence`; true as soon as a majority
   * is at `fence` or above, false when that can no longer happen or at the timeout.
   */
  async function raise(keys: LockKeys, fences: (number | undefined)[], fence: number, ttl: number): Promise<Answer<boolean>[]> {
    return each(
      timeoutFor(ttl),
      'skip',
      (node, i) => {
        const f = fences[i];
        if (f === undefined) return Promise.resolve(false); // not a voter
        if (f >= fence) return Promise.resolve(true);
        return node.raiseFence(keys, fence, ttl).then(() => true);
      },
      (raised) => raised,
    );
  }

  return {
    name: `redlock (${nodes.length} nodes)`,
    handsOff: false,
    // A permit counted per node cannot be decided by a majority the way one holder can (Redisson
    // has no Redlock semaphore either): refused when the semaphore is made.
    semaphores: false,
    boundsCalls: true, // every fan-out ends at the per-node timeout: a QuorumError says which node hung

    async acquire(keys, token, ttl, queue): Promise<AcquireReply> {
      // A node that votes for after the result: kept while the lease is won and held, given back
      // otherwise (while undecided, the failure path's release to every node covers it), unless
      // a later attempt with the same token was sent to that node since, or a release that
      // was sent behind this acquire already took it back.
      let decided: 'pending' | 'won' | 'lost' = 'pending';
      const attempt = lateReplies.nextAttempt();
      const sent = lateReplies.sentAttempts(token);
      // One call for every node, built once: the same keys and arguments, so every node is
      // offered the same fence floor, the voters whose counters agree issue equal fences, and
      // the raise below costs no round trip.
      const call = acquireCall(keys, token, ttl, queue, floors.floorFor(keys));
      const answers = await each(
        timeoutFor(ttl),
        'skip',
        (node, index) => {
          lateReplies.sending(sent, index, attempt, node.resends);
          return node.acquireWith(call);
        },
        (reply) => reply.acquired,
        (index, reply) => {
          if (reply.acquired) floors.saw(keys, reply.fence); // a straggler's counter, often the highest after a lock's first acquire
          const keep = decided === 'pending' || (decided === 'won' && lateReplies.isLive(token));
          if (!reply.acquired || keep) return;
          if (lateReplies.tracks(token, sent) && lateReplies.givesBack(sent, index, attempt, nodes[index]!.resends)) each.sendOne(index, () => nodes[index]!.release(keys, token));
        },
        () => lateReplies.replied(token, sent),
      );
      lateReplies.sentAll(token, sent);
      // The steady state first: a majority voted for and issued one fence, the highest (the
      // counters agree): nothing to raise and no outcome to build.
      const agreed = agreedFence(answers, quorum);
      if (agreed !== undefined) {
        decided = 'won';
        lateReplies.remember(token, ttl);
        floors.saw(keys, agreed);
        if (queue) leaveWhere(nodes, keys, token, queue.member, answers);
        return { acquired: true, fence: agreed };
      }
      const fences: (number | undefined)[] = [];
      const ttls: number[] = [];
      const votes = answers.map((a, i): NodeVote => {
        const node = nodes[i]!.name;
        if (!a.ok) return { node, vote: 'error', error: a.error };
        if (a.value.acquired) {
          fences[i] = a.value.fence;
          return { node, vote: 'for' };
        }
        ttls.push(a.value.ttl);
        return { node, vote: 'against', ttl: a.value.ttl };
      });
      let outcome = tally('acquire', quorum, votes);
      // The highest fence issued, won or not: the next attempt's floor lifts the nodes below it.
      const fence = Math.max(...fences.filter((f): f is number => f !== undefined));
      if (outcome.for > 0) floors.saw(keys, fence);
      if (outcome.for >= quorum) {
        // Won, but fewer than a majority issued the highest fence (agreedFence above): the others are raised to it.
        const raised = await raise(keys, fences, fence, ttl);
        if (raised.filter((a) => a.ok && a.value).length >= quorum) {
          decided = 'won';
          lateReplies.remember(token, ttl);
          if (queue) leaveWhere(nodes, keys, token, queue.member, answers);
          return { acquired: true, fence };
        }
        // The raise reached no majority: a voter it failed on counts as a node error, not a vote
        // for (the outcome is then undecided, a QuorumError at the end, not a lock held).
        outcome = tally(
          'acquire',
          quorum,
          votes.map((v, i): NodeVote => {
            const r = raised[i];
            return v.vote === 'for' && !(r?.ok && r.value) ? { node: v.node, vote: 'error', error: r && !r.ok ? r.error : new Error('the fence raise failed') } : v;
          }),
        );
      }
      decided = 'lost';
      releaseEverywhere(keys, token);
      // Not an error yet: the waiter retries until its deadline, and then reports this outcome
      // (a QuorumError when node errors left it undecided, a LockTimeoutError when it was held).
      const holderTag = namedHolder(answers, quorum);
      return { acquired: false, ttl: holderTtl(ttls, outcome), outcome, ...retryAfter(outcome), ...(holderTag === undefined ? {} : { holderTag }) };
    },

    async release(keys, token): Promise<ReleaseReply> {
      lateReplies.forget(token);
      const sent = lateReplies.inFlight(token);
      const call = nodes[0]!.wakeReleaseCall(keys, token);
      const answers = await each(
        timeoutFor(1000),
        'send',
        (node, index) => {
          lateReplies.releaseSent(sent, index);
          return node.releaseWith(keys, token, call);
        },
        isOk,
      );
      // A retry after a QuorumError: the nodes that released it then find it gone now, and still count for.
      const earlier = releasedOn.get(token);
      const merged = earlier ? answers.map((a, i): Answer<ReleaseReply> => (earlier.has(i) ? { ok: true, value: 'ok' } : a)) : answers;
      try {
        const reply = decide(nodes, quorum, keys, 'release', merged);
        releasedOn.delete(token);
        return reply;
      } catch (error) {
        if (releasedOn.size >= 1024) releasedOn.clear();
        releasedOn.set(token, new Set(merged.flatMap((a, i) => (a.ok && isOk(a.value) ? [i] : []))));
        throw error;
      }
    },

    async extend(keys, token, ttl): Promise<OwnershipReply> {
      const reply = decide(nodes, quorum, keys, 'extend', await each(timeoutFor(ttl), 'skip', (node) => node.extend(keys, token, ttl), isOk));
      if (reply === 'ok' && lateReplies.isHeld(token)) lateReplies.remember(token, ttl);
      // Lost on the majority: what is left on the minority is given back at once, not left to expire.
      if (reply !== 'ok') releaseEverywhere(keys, token);
      return reply;
    },

    async leave(keys, member, token): Promise<boolean> {
      const answers = await each(timeoutFor(1000), 'send', (node) => node.leave(keys, member, token), () => false);
      // A node that still holds our token (an acquire that went through late): the caller releases it.
      return answers.some((a) => !a.ok || a.value);
    },

    async registerHolder(key, who, ttl) {
      // On every node: a lookup asks them in turn until one answers.
      await each(timeoutFor(1000), 'skip', (node) => node.registerHolder(key, who, ttl), () => false);
    },

    async lookupHolder(key) {
      const answers = await each(timeoutFor(1000), 'skip', (node) => node.lookupHolder(key), (who) => who !== null);
      for (const a of answers) if (a.ok && a.value !== null) return a.value;
      return null;
    },

    async inspect(keys): Promise<LockSnapshot> {
      // Every node's view (not just a majority's): the lock is held when a majority holds one token.
      const answers = await each(timeoutFor(1000), 'skip', (node) => node.inspect(keys), () => false);
      const views = answers.flatMap((a) => (a.ok ? [a.value] : []));
      if (views.length < quorum) throw new QuorumError(keys.name, tally('inspect', quorum, answers.map((a, i) => voteOf(nodes, i, a))));
      const count = new Map<string, number>();
      for (const v of views) if (v.token !== null) count.set(v.token, (count.get(v.token) ?? 0) + 1);
      const token = [...count].find(([, n]) => n >= quorum)?.[0] ?? null;
      const holding = views.filter((v) => token !== null && v.token === token);
      const fences = views.flatMap((v) => (v.fence === null ? [] : [v.fence]));
      return {
        token,
        // The lease lasts as long as its majority: the quorum-th longest TTL among the holding nodes.
        ttl: token === null ? 0 : holding.map((v) => v.ttl).sort((a, b) => b - a)[quorum - 1]!,
        fence: fences.length > 0 ? Math.max(...fences) : null,
        queued: Math.max(...views.map((v) => v.queued)),
        // A Redlock fence can be a node's counter plus one (the floor), not a clock reading.
        since: null,
      };
    },

    async lockNames(prefix, pattern) {
      const answers = await each(timeoutFor(1000), 'skip', (node) => node.lockNames(prefix, pattern), () => false);
      const lists = answers.flatMap((a) => (a.ok ? [a.value] : []));
      if (lists.length < quorum) throw new QuorumError('*', tally('list', quorum, answers.map((a, i) => voteOf(nodes, i, a))));
      return [...new Set(lists.flat())].sort();
    },

    fencedWrite: () => Promise.reject(onOneRedis('fencedWrite')),
    fencedRead: () => Promise.reject(onOneRedis('fencedRead')),

    watchInbox: (managerId, listener) => watchEveryInbox(nodes, managerId, listener),

    async close() {
      await Promise.all(nodes.map((node) => node.close().catch(() => {})));
    },
  };
}

/** A fenced resource lives on one Redis, not on a quorum. */
function onOneRedis(operation: string): UnsupportedError {
  return new UnsupportedError(
    `${operation} on a Redlock manager`,
    `a fenced resource lives on one Redis; call ${operation} on a manager for that Redis (createLocks({ redis }))`,
  );
}

/**
 * A won acquire that queued: the nodes that did not vote for it (busy, or a straggler whose reply
 * is still to come) keep the waiter's queue entry, which would hand their next wake-up to a waiter
 * that is gone. Each is sent a leave, behind the acquire on the same connection. Hung nodes were
 * sent nothing.
 */
function leaveWhere(nodes: readonly RedisBackend[], keys: LockKeys, token: string, member: string, answers: readonly Answer<AcquireReply>[]): void {
  answers.forEach((a, i) => {
    if (a.ok ? a.value.acquired : a.error instanceof NodeHungError) return;
    nodes[i]!.leave(keys, member, token).catch(() => {});
  });
}
