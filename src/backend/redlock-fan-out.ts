import { Deadlines, type Deadline } from '../deadlines.js';
import type { RedisBackend } from './redis-backend.js';

/** What one node answered within the per-node timeout. */
export type Answer<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: Error };

export class NodeTimeoutError extends Error {
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
export class NodeHungError extends Error {
  constructor(since: number) {
    super(`not answering (a request has waited ${Math.round(performance.now() - since)} ms)`);
    this.name = 'NodeHungError';
  }
}

/** Most commands sent to one hung node without waiting (releases); past it, its keys expire by their TTL. */
const MAX_QUEUED_TO_HUNG = 1000;

/** How often a hung node is asked again although its earlier request is still unanswered, ms. */
const PROBE_EVERY = 1000;

/**
 * The fan-out to `nodes` of one Redlock backend, made once: every call shares the nodes' hung
 * state and one timer for all the calls' deadlines.
 */
export function fanOut(nodes: readonly RedisBackend[], quorum: number) {
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
          if (hung === 'send') queueToHung(index, () => call(node, index), settled);
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
   * Sends `call` to node `index` without waiting for it: a release nobody waits for (a lost
   * attempt's, a late reply's give-back). A hung node gets it only while fewer than
   * MAX_QUEUED_TO_HUNG such commands are unanswered there, as `each` sends releases: past that,
   * its keys expire by their TTL, and a black-holed connection does not grow without end.
   */
  function sendOne(index: number, call: () => Promise<unknown>): void {
    if (hungSince[index] === undefined) call().catch(() => {});
    else queueToHung(index, call);
  }

  /**
   * Sends `call` to hung node `index` without waiting for it, up to a bound: a black-holed
   * connection must not grow without end. `after` runs once it settled (not when over the bound).
   */
  function queueToHung(index: number, call: () => Promise<unknown>, after?: () => void): void {
    if (queuedToHung[index]! >= MAX_QUEUED_TO_HUNG) return;
    queuedToHung[index]!++;
    call()
      .catch(() => {})
      .finally(() => {
        queuedToHung[index]!--;
        after?.();
      });
  }

  return Object.assign(each, { sendOne });
}
