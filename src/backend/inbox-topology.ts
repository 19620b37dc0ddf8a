import { now } from '../clock.js';
import { settleBy } from '../deadlines.js';
import type { LockKeys } from '../keys.js';

/** One sharded inbox channel, as {@link followTopology} sees it. */
export interface FollowedChannel {
  /** The lock the channel is for: a probe is routed by its key. */
  readonly keys: LockKeys;
  /** How many waiters hold an interest in it; 0 on its way out. */
  readonly count: number;
  /** True once its first subscribe completed (a channel still subscribing is not probed). */
  readonly subscribed: boolean;
  /** True while its subscription is known to be on the slot's master: `listening()` reports it. */
  ready: boolean;
  /** Called when it listens again. */
  readied?(): void;
}

/** What {@link followTopology} needs from the inbox it follows for. */
export interface TopologyHooks {
  /** The channels now (read at each check). */
  channels(): Iterable<[string, FollowedChannel]>;
  /** How many subscribers the channel has on its slot's master (what SPUBLISH there counts). */
  probe(keys: LockKeys, channel: string): Promise<number>;
  /** Subscribes to the channel again, on the node the client now routes its slot to. */
  resubscribe(channel: string): Promise<void>;
  /** Asks the client to read the topology again: its slot map is stale. */
  refresh(): void;
  /** A channel listens again after it had lost its subscription: every waiter looks again (a wake-up may have been lost). */
  recovered(): void;
}

/** How often the channels are probed with no topology event, ms: a move the client did not report is found within this. */
export const INBOX_AUDIT_MS = 5000;
/**
 * The first wait before a lost channel is probed again, ms; it doubles up to {@link RESUBSCRIBE_MAX_MS}.
 * The cap bounds how long after a move has settled its channel is heard again: a move can last
 * seconds (a forced failover's election), the back-off reaches its cap meanwhile, and the
 * channel is then found and joined again at most two waits after the move ends (with a cap of
 * 1000 ms, GLIDE's channel was heard again 1.95 s after a 3 s forced failover in CI). A probe
 * and a resubscribe per lost channel every 250 ms is what a channel costs while its node is away.
 */
export const RESUBSCRIBE_FIRST_MS = 25;
export const RESUBSCRIBE_MAX_MS = 250;
/**
 * How long a check waits for one probe or one resubscribe, ms. A client may not settle a call
 * sent while its view of the cluster is stale (ioredis 5 leaves an SSUBSCRIBE sent to a node of
 * another shard unanswered), and a check that waited for it stopped recovering its channels: a
 * probe not answered by then counts as unheard, a resubscribe as sent, and the check goes on, on
 * its own clock. A channel's next resubscribe waits until its last one settled.
 */
export const TOPOLOGY_CALL_MS = 1000;

/**
 * Keeps a Cluster inbox's sharded subscriptions on the masters that own their channels' slots.
 * A check probes every subscribed channel on its slot's master. One that nobody listens on there
 * (its subscription was dropped by a failover or a reshard, or stayed on a demoted master) stops
 * reporting itself listening, is subscribed again after the client has been asked to refresh its
 * slots, and is probed again, with a doubling back-off, until it listens; then every waiter looks
 * again at once, for a grant or wake-up published in the gap. A check runs on each topology event
 * the client reports, and every {@link INBOX_AUDIT_MS} while armed: the inbox arms it when a channel
 * gets its first waiter and disarms it when no channel has one left.
 */
export function followTopology(hooks: TopologyHooks, auditMs = INBOX_AUDIT_MS): { check(): void; arm(): void; disarm(): void; close(): void } {
  let running = false;
  /** Another check was asked for while one ran. */
  let again = false;
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  /** The periodic check, only while some channel has waiters: an idle inbox keeps no timer. */
  let audit: NodeJS.Timeout | undefined;
  const disarm = (): void => {
    clearInterval(audit);
    audit = undefined;
  };

  const pause = (ms: number): Promise<void> =>
    new Promise((resolve) => {
      timer = setTimeout(resolve, ms);
      timer.unref();
    });

  /** The resubscribes sent and not settled yet, by channel (see {@link TOPOLOGY_CALL_MS}). */
  const resubscribing = new Map<string, Promise<void>>();
  const bounded = <T>(call: Promise<T>, what: string): Promise<T> =>
    settleBy(call, now() + TOPOLOGY_CALL_MS, () => new Error(`inbox ${what}: no reply in ${TOPOLOGY_CALL_MS} ms`));

  /** Subscribes `channel` again unless its last resubscribe is still in flight; resolves within TOPOLOGY_CALL_MS. */
  function resubscribe(channel: string): Promise<void> {
    let call = resubscribing.get(channel);
    if (!call) {
      call = hooks.resubscribe(channel).then(
        () => void resubscribing.delete(channel),
        () => void resubscribing.delete(channel),
      );
      resubscribing.set(channel, call);
    }
    return bounded(call, 'resubscribe').catch(() => {});
  }

  /** Probes the channels; returns those nobody listens on at their master (or whose probe failed). */
  async function probeAll(only?: ReadonlySet<string>): Promise<{ lost: string[]; recovered: boolean }> {
    const lost: string[] = [];
    let recovered = false;
    const probes: Promise<void>[] = [];
    for (const [channel, entry] of hooks.channels()) {
      if (entry.count <= 0 || !entry.subscribed || (only && !only.has(channel))) continue;
      probes.push(
        bounded(hooks.probe(entry.keys, channel), 'probe').then(
          (count) => {
            if (count > 0) {
              if (!entry.ready) {
                recovered = true;
                entry.ready = true;
                entry.readied?.();
              }
            } else {
              entry.ready = false;
              lost.push(channel);
            }
          },
          () => {
            entry.ready = false;
            lost.push(channel);
          },
        ),
      );
    }
    await Promise.all(probes);
    return { lost, recovered };
  }

  /**
   * Waiters are woken only when a channel was found unheard and is heard again. (Waking them on
   * every topology event, in case the client moved a subscription on its own before a probe saw
   * it gone, sent their attempts into the move: node-redis 6 rejects the commands in flight on a
   * node client that a slot rediscovery drops, "Disconnects client", which ended their waits.
   * A waiter a release passed over in such a short gap keeps its place and wakes at its recheck.)
   */
  async function run(): Promise<void> {
    let { lost, recovered } = await probeAll();
    let delay = RESUBSCRIBE_FIRST_MS;
    while (lost.length > 0 && !closed) {
      hooks.refresh();
      await Promise.all(lost.map(resubscribe));
      await pause(delay);
      if (closed) return;
      delay = Math.min(delay * 2, RESUBSCRIBE_MAX_MS);
      const next = await probeAll(new Set(lost));
      lost = next.lost;
      recovered ||= next.recovered;
    }
    if (recovered && lost.length === 0 && !closed) hooks.recovered();
  }

  function check(): void {
    if (closed) return;
    if (running) {
      again = true;
      return;
    }
    running = true;
    void run()
      .catch(() => {})
      .finally(() => {
        running = false;
        if (again) {
          again = false;
          check();
        }
      });
  }

  return {
    check,
    arm() {
      if (audit || closed) return;
      audit = setInterval(() => check(), auditMs);
      audit.unref();
    },
    disarm,
    close() {
      closed = true;
      disarm();
      clearTimeout(timer);
    },
  };
}
