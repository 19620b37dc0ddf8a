import { QuorumError } from '../errors.js';
import type { LockKeys } from '../keys.js';
import type { AcquireReply, OwnershipReply, ReleaseReply } from './backend.js';
import { tally, undecided, type NodeVote, type QuorumOutcome } from './quorum.js';
import type { Answer } from './redlock-fan-out.js';
import type { RedisBackend } from './redis-backend.js';

/** Longest split-vote back-off, ms: contenders that split the nodes between them retry at random times in [0, this]. */
const SPLIT_JITTER = 20;
/** After node errors: retry in [ERROR_DELAY, 3 * ERROR_DELAY] ms, not at once (the node may be restarting). */
const ERROR_DELAY = 25;

/** An extend or release that a node confirmed. */
export const isOk = (reply: OwnershipReply | ReleaseReply): boolean => reply === 'ok' || typeof reply === 'object';

/** A read's vote: a node that answered is for. */
export function voteOf(nodes: readonly RedisBackend[], index: number, a: Answer<unknown>): NodeVote {
  return a.ok ? { node: nodes[index]!.name, vote: 'for' } : { node: nodes[index]!.name, vote: 'error', error: a.error };
}

/** Votes on an extend or release: `ok` is for; `gone` or `taken` against. */
function ownershipVotes(nodes: readonly RedisBackend[], answers: Answer<OwnershipReply | ReleaseReply>[]): { votes: NodeVote[]; taken: boolean } {
  let taken = false;
  const votes = answers.map((a, i): NodeVote => {
    const node = nodes[i]!.name;
    if (!a.ok) return { node, vote: 'error', error: a.error };
    if (a.value === 'taken') taken = true;
    return a.value === 'gone' || a.value === 'taken' ? { node, vote: 'against' } : { node, vote: 'for' };
  });
  return { votes, taken };
}

/** The outcome of an extend or release on `nodes`: held by a majority, lost, or unknown (too many errors: throws). */
export function decide(
  nodes: readonly RedisBackend[],
  quorum: number,
  keys: LockKeys,
  operation: string,
  answers: Answer<OwnershipReply | ReleaseReply>[],
): OwnershipReply {
  // The common case first: a majority confirmed it, and no votes need building.
  if (answers.filter((a) => a.ok && isOk(a.value)).length >= quorum) return 'ok';
  const { votes, taken } = ownershipVotes(nodes, answers);
  const outcome = tally(operation, quorum, votes);
  if (outcome.for >= quorum) return 'ok';
  if (undecided(outcome)) throw new QuorumError(keys.name, outcome);
  return taken ? 'taken' : 'gone';
}

/** The fence a majority of the nodes issued when it is also the highest any node issued (the counters agree), else undefined. */
export function agreedFence(answers: readonly Answer<AcquireReply>[], quorum: number): number | undefined {
  let highest = -Infinity;
  for (const a of answers) if (a.ok && a.value.acquired && a.value.fence > highest) highest = a.value.fence;
  let at = 0;
  for (const a of answers) if (a.ok && a.value.acquired && a.value.fence === highest) at++;
  return at >= quorum ? highest : undefined;
}

/**
 * The holder a failed acquire names: the `who` that at least `quorum` nodes answered busy with
 * (each node names the record of the token it holds), else undefined: nodes that do not agree,
 * or too few records, name nobody.
 */
export function namedHolder(answers: readonly Answer<AcquireReply>[], quorum: number): string | undefined {
  const named = new Map<string, number>();
  for (const a of answers) {
    if (!a.ok || a.value.acquired || a.value.holderTag === undefined) continue;
    const count = (named.get(a.value.holderTag) ?? 0) + 1;
    if (count >= quorum) return a.value.holderTag;
    named.set(a.value.holderTag, count);
  }
  return undefined;
}

/**
 * When a majority of the nodes will be free, as far as the replies tell: the holder's keys expire
 * one by one, and `quorum` of them must be free. -1 when unknown.
 */
export function holderTtl(ttls: number[], outcome: QuorumOutcome): number {
  const free = outcome.votes.length - outcome.against - outcome.errors;
  const need = outcome.quorum - free;
  if (need <= 0) return 0;
  const sorted = ttls.filter((t) => t >= 0).sort((a, b) => a - b);
  return sorted[need - 1] ?? -1;
}

/**
 * How long a failed attempt that the holder's release will not end waits before the next
 * (a split vote, or node errors), whatever wakes it: random, so contenders do not collide again.
 */
export function retryAfter(outcome: QuorumOutcome): { retryAfter?: number } {
  // Held by a majority: wait for its release (or its TTL), not on a timer.
  if (outcome.against >= outcome.quorum) return {};
  if (outcome.errors > 0) return { retryAfter: ERROR_DELAY + Math.floor(Math.random() * (2 * ERROR_DELAY + 1)) };
  if (outcome.for > 0) return { retryAfter: Math.floor(Math.random() * (SPLIT_JITTER + 1)) };
  return {};
}
