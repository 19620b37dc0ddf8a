/**
 * Redlock's outcome as data: how each node voted on one operation. A failed acquire, extend or
 * release over several masters carries this, so "no quorum" always says which nodes said no and
 * which could not be asked, with their errors.
 */

/** One node's answer. */
export type NodeVote =
  /** The node did what was asked (acquired, extended, released). */
  | { readonly node: string; readonly vote: 'for' }
  /** The node refused: the lock is held by another owner there (`ttl`: its remaining TTL, ms, -1 if none), or the lease is gone. */
  | { readonly node: string; readonly vote: 'against'; readonly ttl?: number }
  /** The node failed or did not answer within the per-node timeout. */
  | { readonly node: string; readonly vote: 'error'; readonly error: Error };

/** How the nodes voted on one operation. */
export interface QuorumOutcome {
  /** `acquire`, `extend`, `release`. */
  readonly operation: string;
  /** Votes needed: a majority of the nodes. */
  readonly quorum: number;
  /** One vote per node, in the order the nodes were given. */
  readonly votes: readonly NodeVote[];
  readonly for: number;
  readonly against: number;
  readonly errors: number;
}

/** Majority of `n` nodes. */
export function quorumOf(n: number): number {
  return Math.floor(n / 2) + 1;
}

export function tally(operation: string, quorum: number, votes: readonly NodeVote[]): QuorumOutcome {
  let pro = 0;
  let against = 0;
  let errors = 0;
  for (const v of votes) {
    if (v.vote === 'for') pro++;
    else if (v.vote === 'against') against++;
    else errors++;
  }
  return { operation, quorum, votes, for: pro, against, errors };
}

/** True when the errors alone kept the outcome undecided: with them answering, a majority could have been either way. */
export function undecided(outcome: QuorumOutcome): boolean {
  return outcome.for < outcome.quorum && outcome.for + outcome.errors >= outcome.quorum;
}

/** `2 of 3 needed; for: a, b; against: c; error: d (connect ECONNREFUSED)`. Never includes tokens. */
export function describeOutcome(outcome: QuorumOutcome): string {
  const parts = [`${outcome.for} of ${outcome.votes.length} nodes voted for, ${outcome.quorum} needed`];
  for (const v of outcome.votes) {
    if (v.vote === 'for') parts.push(`${v.node}: for`);
    else if (v.vote === 'against') parts.push(`${v.node}: against${v.ttl !== undefined && v.ttl >= 0 ? ` (held, ${v.ttl} ms left)` : ''}`);
    else parts.push(`${v.node}: error (${v.error.message})`);
  }
  return parts.join('; ');
}
