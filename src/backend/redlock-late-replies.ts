/** Acquire attempts sent with one token whose replies may still come (see {@link LateReplies}). */
export interface SentAttempts {
  /** Per node: the last attempt sent there, negated once a release was sent behind it. */
  readonly last: number[];
  /** Per node: its count of scripts re-sent with EVAL when that attempt was sent. */
  readonly resends: number[];
  /** Replies (or failures) still to come. */
  outstanding: number;
}

/** Most tokens with replies outstanding kept; past it the records are dropped (see `sentAttempts`). */
const IN_FLIGHT_KEPT = 4096;

/** How many live leases are kept before the expired ones are swept. */
const LIVE_SWEEP_AT = 1024;

/**
 * What a Redlock backend knows of its tokens to decide about an acquire reply that comes after the
 * attempt was decided: the attempts in flight per token, and the leases won and not yet released.
 *
 * Per token, the acquire attempts whose replies may still come (attempts of one waiter reuse
 * its token): a late acquire reply is given back only if no later attempt went to that node
 * (the release would otherwise land behind the later attempt's acquire and delete its key), and
 * a release sent behind it already covers it. A token's record lives only while a reply is
 * outstanding, so the map holds the tokens in flight, not every token ever sent: thousands of
 * retained tokens made each young-generation GC copy them, and that showed in the p99.
 */
export class LateReplies {
  readonly #inFlight = new Map<string, SentAttempts>();
  /**
   * Tokens of leases won and not yet released, with when they expire. A node's acquire reply can
   * come after the lease was released: from a node that hung, or because a NOSCRIPT fallback
   * re-sent the acquire as EVAL behind the release. Such a late acquire is given back.
   */
  readonly #live = new Map<string, number>();
  #attempts = 0;

  /** A number for a new acquire attempt, higher than every earlier one. */
  nextAttempt(): number {
    return ++this.#attempts;
  }

  /** The record of `token`'s attempts in flight, made when there is none. */
  sentAttempts(token: string): SentAttempts {
    let sent = this.#inFlight.get(token);
    if (!sent) {
      // Replies that never come (a node black-holed for good) leave records: bounded. An
      // attempt whose record is dropped is never given back when it answers (see `tracks`): its
      // key only waits for its TTL.
      if (this.#inFlight.size >= IN_FLIGHT_KEPT) this.#inFlight.clear();
      sent = { last: [], resends: [], outstanding: 0 };
      this.#inFlight.set(token, sent);
    }
    return sent;
  }

  /** The record of `token`'s attempts in flight, if any (for a release, which makes none). */
  inFlight(token: string): SentAttempts | undefined {
    return this.#inFlight.get(token);
  }

  /** `attempt` goes to node `index`, whose count of EVAL re-sends is `resends`: its reply is outstanding. */
  sending(sent: SentAttempts, index: number, attempt: number, resends: number): void {
    sent.last[index] = attempt;
    sent.resends[index] = resends;
    sent.outstanding++;
  }

  /** One of `token`'s replies came (or failed): the record goes once none is outstanding. */
  replied(token: string, sent: SentAttempts): void {
    if (--sent.outstanding === 0) this.#forgetIdle(token, sent);
  }

  /**
   * The attempt's fan-out is over: a record with nothing outstanding goes (every node was skipped
   * as hung, so no reply will ever delete it: such records piled up until the map was cleared).
   */
  sentAll(token: string, sent: SentAttempts): void {
    if (sent.outstanding === 0) this.#forgetIdle(token, sent);
  }

  /**
   * Whether `sent` is still `token`'s record. One dropped when the map was full no longer knows
   * of the attempts sent after it, nor of the releases sent behind them: a late reply read
   * against it could release a later attempt's key. Such a reply is left to its TTL.
   */
  tracks(token: string, sent: SentAttempts): boolean {
    return this.#inFlight.get(token) === sent;
  }

  #forgetIdle(token: string, sent: SentAttempts): void {
    if (this.tracks(token, sent)) this.#inFlight.delete(token);
  }

  /**
   * Notes that a release went to node `index` after the last acquire attempt sent there (stored
   * as the attempt's negative): Redis runs one connection's commands in order, so that release
   * already undoes a late reply of that acquire, unless a NOSCRIPT fallback re-sent the acquire
   * behind it (see {@link LateReplies.givesBack}).
   */
  releaseSent(sent: SentAttempts | undefined, index: number): void {
    const attempt = sent?.last[index];
    if (attempt !== undefined && attempt > 0) sent!.last[index] = -attempt;
  }

  /**
   * Whether a late acquire of `attempt` that node `index` granted must be released there: no later
   * attempt went to that node since, and no release sent behind it already took it back. A release
   * sent behind it covers it unless the node re-sent a script with EVAL since (NOSCRIPT, its count
   * now `resends`), which can put this acquire behind that release.
   */
  givesBack(sent: SentAttempts, index: number, attempt: number, resends: number): boolean {
    const last = sent.last[index];
    const covered = last === -attempt && resends === sent.resends[index];
    return last === attempt || (last === -attempt && !covered);
  }

  /** The lease of `token` was won (or extended) for `ttl` ms. */
  remember(token: string, ttl: number): void {
    const live = this.#live;
    if (live.size >= LIVE_SWEEP_AT) for (const [t, until] of live) if (until <= performance.now()) live.delete(t);
    live.set(token, performance.now() + ttl);
  }

  /** The lease of `token` was won and its TTL has not run out: a late acquire for it is kept. */
  isLive(token: string): boolean {
    return (this.#live.get(token) ?? 0) > performance.now();
  }

  /** The lease of `token` was won and not released. */
  isHeld(token: string): boolean {
    return this.#live.has(token);
  }

  /** The lease of `token` is released (or given back): a late acquire for it is given back. */
  forget(token: string): void {
    this.#live.delete(token);
  }
}
