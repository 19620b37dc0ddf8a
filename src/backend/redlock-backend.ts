import { Deadlines, type Deadline } from '../deadlines.js';
import { QuorumError, UnsupportedError } from '../errors.js';
import type { LockKeys } from '../keys.js';
import type { AcquireReply, Backend, Inbox, LockSnapshot, OwnershipReply, ReleaseReply } from './backend.js';
import { quorumOf, tally, undecided, type NodeVote, type QuorumOutcome } from './quorum.js';
import { acquireCall, type RedisBackend } from './redis-backend.js';

export interface RedlockSettings {
  /** Longest wait for one node's reply, ms; `undefined`: a tenth of the TTL, between 10 and 100 ms. */
  readonly nodeTimeout: number | undefined;
}

/** Acquire attempts sent with one token whose replies may still come (see `inFlight`). */
interface SentAttempts {
  /** Per node: the last attempt sent there, negated once a release was sent behind it. */
  readonly last: number[];
  /** Per node: its count of scripts re-sent with EVAL when that attempt was sent. */
  readonly resends: number[];
  /** Replies (or failures) still to come. */
  outstanding: number;
}

/** What one node answered within the per-node timeout. */
type Answer<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: Error };

class NodeTimeoutError extends Error {
  constructor(ms: number) {
    super(`no reply within ${ms} ms`);
    this.name = 'NodeTimeoutError';
  }
}

/** A node that had not answered when a majority already had. */
class NodePendingError extends Error {
  constructor() {
    super('no reply yet (a majority had answered)');
    this.name = 'NodePendingError';
  }
}

/**
 * One instance for every pending node: an acquire resolved at a majority leaves one per straggler,
 * and capturing a stack for each cost more CPU than the rest of the fan-out together.
 */
const PENDING = new NodePendingError();
const NOT_YET: Answer<never> = { ok: false, error: PENDING };

/** A node with a request unanswered past its timeout: not waited for again until it answers. */
class NodeHungError extends Error {
  constructor(since: number) {
    super(`not answering (a request has waited ${Math.round(performance.now() - since)} ms)`);
    this.name = 'NodeHungError';
  }
}

/** Longest wait for one node's subscription when the inbox opens, ms (a hung node never completes it). */
const INBOX_WAIT = 1000;

/** Most commands sent to one hung node without waiting (releases); past it, its keys expire by their TTL. */
const MAX_QUEUED_TO_HUNG = 1000;

/** How often a hung node is asked again although its earlier request is still unanswered, ms. */
const PROBE_EVERY = 1000;

/** How many locks' last fences a Redlock backend keeps as floors for their next acquire (see `seen` in redlockBackend). */
const FENCES_KEPT = 1024;

/** Longest split-vote back-off, ms: contenders that split the nodes between them retry at random times in [0, this]. */
const SPLIT_JITTER = 20;
/** After node errors: retry in [ERROR_DELAY, 3 * ERROR_DELAY] ms, not at once (the node may be restarting). */
const ERROR_DELAY = 25;

/**
 * How long a failed attempt that the holder's release will not end waits before the next
 * (a split vote, or node errors), whatever wakes it: random, so contenders do not collide again.
 */
function retryAfter(outcome: QuorumOutcome): { retryAfter?: number } {
  // Held by a majority: wait for its release (or its TTL), not on a timer.
  if (outcome.against >= outcome.quorum) return {};
  if (outcome.errors > 0) return { retryAfter: ERROR_DELAY + Math.floor(Math.random() * (2 * ERROR_DELAY + 1)) };
  if (outcome.for > 0) return { retryAfter: Math.floor(Math.random() * (SPLIT_JITTER + 1)) };
  return {};
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

  /**
   * Per node: since when a request has been unanswered past its timeout (a hung server, a
   * black-holed connection). Such a node is waited for once per hang, not once per call: until
   * it answers, acquires and extends skip it and releases are sent without waiting for it.
   */
  const hungSince: (number | undefined)[] = nodes.map(() => undefined);
  /** When a hung node was last sent a request anyway (a probe, once a second, for a connection that never errors). */
  const probedAt: number[] = nodes.map(() => 0);
  /** Commands sent to a hung node without waiting for them, still unanswered. */
  const queuedToHung: number[] = nodes.map(() => 0);
  /**
   * Per token, the acquire attempts whose replies may still come (attempts of one waiter reuse
   * its token): a late acquire reply is given back only if no later attempt went to that node
   * (the release would otherwise land behind the later attempt's acquire and delete its key), and
   * a release sent behind it already covers it. A token's record lives only while a reply is
   * outstanding, so the map holds the tokens in flight, not every token ever sent: thousands of
   * retained tokens made each young-generation GC copy them, and that showed in the p99.
   */
  const inFlight = new Map<string, SentAttempts>();
  /** The record of `token`'s attempts in flight, made when there is none. */
  const sentAttempts = (token: string): SentAttempts => {
    let sent = inFlight.get(token);
    if (!sent) {
      // Replies that never come (a node black-holed for good) leave records: bounded. An
      // attempt whose record is dropped is never given back when it answers: only a TTL's delay.
      if (inFlight.size >= 4096) inFlight.clear();
      sent = { last: [], resends: [], outstanding: 0 };
      inFlight.set(token, sent);
    }
    return sent;
  };
  /** One of `token`'s replies came (or failed): the record goes once none is outstanding. */
  const replied = (token: string, sent: SentAttempts): void => {
    if (--sent.outstanding === 0 && inFlight.get(token) === sent) inFlight.delete(token);
  };
  /**
   * Notes that a release went to node `index` after the last acquire attempt sent there (stored
   * as the attempt's negative): Redis runs one connection's commands in order, so that release
   * already undoes a late reply of that acquire, unless a NOSCRIPT fallback re-sent the acquire
   * behind it (see the late handler in acquire).
   */
  const releaseSent = (sent: SentAttempts | undefined, index: number): void => {
    const attempt = sent?.last[index];
    if (attempt !== undefined && attempt > 0) sent!.last[index] = -attempt;
  };
  let attempts = 0;
  /**
   * Per lock (its fence key), the highest fence a node issued to this backend for it: won or not,
   * on time or late. The next acquire offers one more as the floor (see acquire.lua). When this
   * backend took the lock last, that is each node's next fence (its counter + 1) and a node
   * writes its counter once; a node whose counter is behind (it missed acquires, or issued its
   * own clock to the lock's first acquire while a later straggler issued a higher one) is lifted
   * to it, so the counters come to agree without a raise. After another caller's acquires the
   * nodes issue their counter + 1. Every value here was issued by a node, so no clock of this
   * machine reaches a fence. Bounded: past FENCES_KEPT locks the oldest goes, and its next
   * acquire offers 0 (no floor).
   */
  const seen = new Map<string, number>();
  const floorFor = (keys: LockKeys): number => {
    const fence = seen.get(keys.fence);
    return fence === undefined ? 0 : fence + 1;
  };
  const saw = (keys: LockKeys, fence: number): void => {
    const before = seen.get(keys.fence);
    if (before !== undefined && before >= fence) return;
    if (before === undefined && seen.size >= FENCES_KEPT) seen.delete(seen.keys().next().value!);
    seen.set(keys.fence, fence);
  };
  /** Per token, the nodes that confirmed a release that ended in a QuorumError: a retry counts them. */
  const releasedOn = new Map<string, Set<number>>();

  const deadlines = new Deadlines();

  /**
   * Calls every node, with one deadline for all of them: an answer that does not come within `ms`
   * counts as an error, and its node is marked hung. Resolves as soon as `quorum` nodes answered
   * `isFor` (the stragglers' answers do not change the outcome, and the slowest node does not set
   * the latency), or when every node answered, or at the timeout. A node that has not answered is
   * `pending` in the result. `late` sees values that arrive after the result (an acquire that went
   * through after all). `hung`: what to do with a hung node: `skip` it (an error vote at once,
   * nothing sent), or `send` the command without waiting for it (releases, which must reach every
   * node when it wakes). `settled` is told of every reply and failure of a call made, on time
   * or late (after `late`).
   */
  function each<T>(
    ms: number,
    hung: 'skip' | 'send',
    call: (node: RedisBackend, index: number) => Promise<T>,
    isFor: (value: T) => boolean,
    late?: (index: number, value: T) => void,
    settled?: () => void,
  ): Promise<Answer<T>[]> {
    return new Promise<Answer<T>[]>((resolve) => {
      const answers: (Answer<T> | undefined)[] = nodes.map(() => undefined);
      let open = nodes.length;
      let votesFor = 0;
      let done = false;
      const t = performance.now();
      const deadline: Deadline = {
        at: t + ms,
        expire: (now) => {
          answers.forEach((a, index) => {
            if (a) return;
            if (hungSince[index] === undefined) {
              hungSince[index] = now - ms;
              probedAt[index] = now; // asked again in PROBE_EVERY ms, not on the next call
            }
            answers[index] = { ok: false, error: new NodeTimeoutError(ms) };
          });
          finish();
        },
      };
      const finish = (): void => {
        if (done) return;
        done = true;
        deadlines.delete(deadline);
        // Filled in place: nothing writes to `answers` once done (later replies go to `late`).
        for (let i = 0; i < answers.length; i++) answers[i] ??= NOT_YET;
        resolve(answers as Answer<T>[]);
      };
      const answer = (index: number, a: Answer<T>): void => {
        answers[index] = a;
        open--;
        if (a.ok && isFor(a.value)) votesFor++;
        if (votesFor >= quorum || open === 0) finish();
      };
      deadlines.watch(deadline);
      nodes.forEach((node, index) => {
        const since = hungSince[index];
        if (since !== undefined && t - probedAt[index]! < PROBE_EVERY) {
          // Sent without waiting, up to a bound: a black-holed connection must not grow without end.
          if (hung === 'send' && queuedToHung[index]! < MAX_QUEUED_TO_HUNG) {
            queuedToHung[index]!++;
            call(node, index)
              .catch(() => {})
              .finally(() => {
                queuedToHung[index]!--;
                settled?.();
              });
          }
          answer(index, { ok: false, error: new NodeHungError(since) });
          return;
        }
        if (since !== undefined) probedAt[index] = t;
        call(node, index).then(
          (value) => {
            hungSince[index] = undefined; // it answers again
            if (done) late?.(index, value);
            else answer(index, { ok: true, value });
            settled?.();
          },
          (error: unknown) => {
            hungSince[index] = undefined;
            if (!done) answer(index, { ok: false, error: error instanceof Error ? error : new Error(String(error)) });
            settled?.();
          },
        );
      });
    });
  }

  /**
   * Tokens of leases won and not yet released, with when they expire. A node's acquire reply can
   * come after the lease was released: from a node that hung, or because a NOSCRIPT fallback
   * re-sent the acquire as EVAL behind the release. Such a late acquire is given back.
   */
  const live = new Map<string, number>();
  const isLive = (token: string): boolean => (live.get(token) ?? 0) > performance.now();
  const remember = (token: string, ttl: number): void => {
    if (live.size >= 1024) for (const [t, until] of live) if (until <= performance.now()) live.delete(t);
    live.set(token, performance.now() + ttl);
  };

  const releaseEverywhere = (keys: LockKeys, token: string): void => {
    live.delete(token);
    const sent = inFlight.get(token);
    nodes.forEach((node, index) => {
      releaseSent(sent, index);
      node.release(keys, token).catch(() => {});
    });
  };

  /** A read's vote: a node that answered is for. */
  const voteOf = (index: number, a: Answer<unknown>): NodeVote =>
    a.ok ? { node: nodes[index]!.name, vote: 'for' } : { node: nodes[index]!.name, vote: 'error', error: a.error };

  /** Votes on an extend or release: `ok` is for; `gone` or `taken` against. */
  function ownershipVotes(answers: Answer<OwnershipReply | ReleaseReply>[]): { votes: NodeVote[]; taken: boolean } {
    let taken = false;
    const votes = answers.map((a, i): NodeVote => {
      const node = nodes[i]!.name;
      if (!a.ok) return { node, vote: 'error', error: a.error };
      if (a.value === 'taken') taken = true;
      return a.value === 'gone' || a.value === 'taken' ? { node, vote: 'against' } : { node, vote: 'for' };
    });
    return { votes, taken };
  }

  /** The outcome of an extend or release: held by a majority, lost, or unknown (too many errors: throws). */
  function decide(keys: LockKeys, operation: string, answers: Answer<OwnershipReply | ReleaseReply>[]): OwnershipReply {
    // The common case first: a majority confirmed it, and no votes need building.
    if (answers.filter((a) => a.ok && isOk(a.value)).length >= quorum) return 'ok';
    const { votes, taken } = ownershipVotes(answers);
    const outcome = tally(operation, quorum, votes);
    if (outcome.for >= quorum) return 'ok';
    if (undecided(outcome)) throw new QuorumError(keys.name, outcome);
    return taken ? 'taken' : 'gone';
  }

  /**
   * Lifts the counters of the voters that issued less than `fence`; true as soon as a majority
   * is at `fence` or above, false when that can no longer happen or at the timeout.
   */
  async function raise(keys: LockKeys, fences: (number | undefined)[], fence: number, ttl: number): Promise<boolean> {
    const atFence = await each(
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
    return atFence.filter((a) => a.ok && a.value).length >= quorum;
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
      const attempt = ++attempts;
      const sent = sentAttempts(token);
      // One call for every node, built once: the same keys and arguments, so every node is
      // offered the same fence floor, the voters whose counters agree issue equal fences, and
      // the raise below costs no round trip.
      const call = acquireCall(keys, token, ttl, queue, floorFor(keys));
      const answers = await each(
        timeoutFor(ttl),
        'skip',
        (node, index) => {
          sent.last[index] = attempt;
          sent.resends[index] = node.resends;
          sent.outstanding++;
          return node.acquireWith(call);
        },
        (reply) => reply.acquired,
        (index, reply) => {
          if (reply.acquired) saw(keys, reply.fence); // a straggler's counter, often the highest after a lock's first acquire
          const keep = decided === 'pending' || (decided === 'won' && isLive(token));
          if (!reply.acquired || keep) return;
          const last = sent.last[index];
          // A release went out after this acquire: it covers it, unless the node re-sent a script
          // with EVAL since (NOSCRIPT), which can put this acquire behind that release.
          const covered = last === -attempt && nodes[index]!.resends === sent.resends[index];
          if (last === attempt || (last === -attempt && !covered)) nodes[index]!.release(keys, token).catch(() => {});
        },
        () => replied(token, sent),
      );
      // The steady state first: a majority voted for and issued one fence, the highest (the
      // counters agree): nothing to raise and no outcome to build.
      const agreed = agreedFence(answers, quorum);
      if (agreed !== undefined) {
        decided = 'won';
        remember(token, ttl);
        saw(keys, agreed);
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
      const outcome = tally('acquire', quorum, votes);
      // The highest fence issued, won or not: the next attempt's floor lifts the nodes below it.
      const fence = Math.max(...fences.filter((f): f is number => f !== undefined));
      if (outcome.for > 0) saw(keys, fence);
      if (outcome.for >= quorum) {
        // Won, but fewer than a majority issued the highest fence (agreedFence above): the others are raised to it.
        if (await raise(keys, fences, fence, ttl)) {
          decided = 'won';
          remember(token, ttl);
          if (queue) leaveWhere(nodes, keys, token, queue.member, answers);
          return { acquired: true, fence };
        }
      }
      decided = 'lost';
      releaseEverywhere(keys, token);
      // Not an error yet: the waiter retries until its deadline, and then reports this outcome
      // (a QuorumError when node errors left it undecided, a LockTimeoutError when it was held).
      return { acquired: false, ttl: holderTtl(ttls, outcome), outcome, ...retryAfter(outcome) };
    },

    async release(keys, token): Promise<ReleaseReply> {
      live.delete(token);
      const sent = inFlight.get(token);
      const call = nodes[0]!.wakeReleaseCall(keys, token);
      const answers = await each(
        timeoutFor(1000),
        'send',
        (node, index) => {
          releaseSent(sent, index);
          return node.releaseWith(keys, token, call);
        },
        isOk,
      );
      // A retry after a QuorumError: the nodes that released it then find it gone now, and still count for.
      const earlier = releasedOn.get(token);
      const merged = earlier ? answers.map((a, i): Answer<ReleaseReply> => (earlier.has(i) ? { ok: true, value: 'ok' } : a)) : answers;
      try {
        const reply = decide(keys, 'release', merged);
        releasedOn.delete(token);
        return reply;
      } catch (error) {
        if (releasedOn.size >= 1024) releasedOn.clear();
        releasedOn.set(token, new Set(merged.flatMap((a, i) => (a.ok && isOk(a.value) ? [i] : []))));
        throw error;
      }
    },

    async extend(keys, token, ttl): Promise<OwnershipReply> {
      const reply = decide(keys, 'extend', await each(timeoutFor(ttl), 'skip', (node) => node.extend(keys, token, ttl), isOk));
      if (reply === 'ok' && live.has(token)) remember(token, ttl);
      // Lost on the majority: what is left on the minority is given back at once, not left to expire.
      if (reply !== 'ok') releaseEverywhere(keys, token);
      return reply;
    },

    async leave(keys, member, token): Promise<boolean> {
      const answers = await each(timeoutFor(1000), 'send', (node) => node.leave(keys, member, token), () => false);
      // A node that still holds our token (an acquire that went through late): the caller releases it.
      return answers.some((a) => !a.ok || a.value);
    },

    async recordHolder(keys, token, who) {
      const answers = await each(timeoutFor(1000), 'skip', (node) => node.recordHolder(keys, token, who), (recorded) => recorded);
      return answers.filter((a) => a.ok && a.value).length >= quorum;
    },

    async inspect(keys): Promise<LockSnapshot> {
      // Every node's view (not just a majority's): the lock is held when a majority holds one token.
      const answers = await each(timeoutFor(1000), 'skip', (node) => node.inspect(keys), () => false);
      const views = answers.flatMap((a) => (a.ok ? [a.value] : []));
      if (views.length < quorum) throw new QuorumError(keys.name, tally('inspect', quorum, answers.map((a, i) => voteOf(i, a))));
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
        holder: holding.find((v) => v.holder !== null)?.holder ?? null,
      };
    },

    async lockNames(prefix, pattern) {
      const answers = await each(timeoutFor(1000), 'skip', (node) => node.lockNames(prefix, pattern), () => false);
      const lists = answers.flatMap((a) => (a.ok ? [a.value] : []));
      if (lists.length < quorum) throw new QuorumError('*', tally('list', quorum, answers.map((a, i) => voteOf(i, a))));
      return [...new Set(lists.flat())].sort();
    },

    fencedWrite: () => Promise.reject(onOneRedis('fencedWrite')),
    fencedRead: () => Promise.reject(onOneRedis('fencedRead')),

    async watchInbox(managerId, listener) {
      // A hung node never completes its subscription: wait for each a bounded time, and add the
      // late ones when they come (or close them, if the inbox was closed meanwhile).
      const inboxes: Inbox[] = [];
      let closed = false;
      const opening = nodes.map((node) =>
        node.watchInbox(managerId, listener).then((inbox) => {
          if (closed) void inbox.close().catch(() => {});
          else inboxes.push(inbox);
        }),
      );
      const opened = await Promise.allSettled(opening.map((o) => withTimeout(o, INBOX_WAIT)));
      if (inboxes.length === 0) {
        closed = true;
        throw (opened.find((o) => o.status === 'rejected') as PromiseRejectedResult).reason;
      }
      // Nodes whose subscription failed: their releases are not heard; waiters still wake at the holder's TTL and each recheck.
      return {
        listening: (keys) => inboxes.every((inbox) => inbox.listening(keys)),
        join: async (keys) => {
          await Promise.all(inboxes.map((inbox) => inbox.join(keys)));
        },
        leave: (keys) => {
          for (const inbox of inboxes) inbox.leave(keys);
        },
        close: async () => {
          closed = true;
          await Promise.all(inboxes.map((inbox) => inbox.close().catch(() => {})));
        },
      };
    },

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

const isOk = (reply: OwnershipReply | ReleaseReply): boolean => reply === 'ok' || typeof reply === 'object';

/** The fence a majority of the nodes issued when it is also the highest any node issued (the counters agree), else undefined. */
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

function agreedFence(answers: readonly Answer<AcquireReply>[], quorum: number): number | undefined {
  let highest = -Infinity;
  for (const a of answers) if (a.ok && a.value.acquired && a.value.fence > highest) highest = a.value.fence;
  let at = 0;
  for (const a of answers) if (a.ok && a.value.acquired && a.value.fence === highest) at++;
  return at >= quorum ? highest : undefined;
}

/**
 * When a majority of the nodes will be free, as far as the replies tell: the holder's keys expire
 * one by one, and `quorum` of them must be free. -1 when unknown.
 */
function holderTtl(ttls: number[], outcome: QuorumOutcome): number {
  const free = outcome.votes.length - outcome.against - outcome.errors;
  const need = outcome.quorum - free;
  if (need <= 0) return 0;
  const sorted = ttls.filter((t) => t >= 0).sort((a, b) => a - b);
  return sorted[need - 1] ?? -1;
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new NodeTimeoutError(ms)), ms);
    timer.unref();
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}
