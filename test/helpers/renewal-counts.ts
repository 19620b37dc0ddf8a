/**
 * Renewals as a manager reports them, counted for tests that wait on them instead of on a timer:
 * give `renewed` to the manager's hooks, then await `reached` (renewals in all) or `more` (each of
 * some leases renewed n times more). A wait is settled by the renewal that completes it.
 */
import type { Lease, RenewedEvent } from '../../src/index.js';

export interface RenewalCounts {
  /** The hook to give the manager (`hooks: { renewed }`). */
  readonly renewed: (event: RenewedEvent) => void;
  /** Renewals reported so far, of every lease together. */
  readonly seen: number;
  /** Resolves once `count` renewals were reported in all. */
  reached(count: number): Promise<void>;
  /**
   * Resolves once each of `leases` was renewed `n` times more than when this was called; rejects
   * after `timeoutMs`, naming the leases still short.
   */
  more(leases: readonly Lease[], n: number, timeoutMs: number): Promise<void>;
}

export function renewalCounts(): RenewalCounts {
  let seen = 0;
  const byKey = new Map<string, number>();
  const waits = new Set<{ done: () => boolean; resolve: () => void }>();
  const until = (done: () => boolean): { promise: Promise<void>; cancel: () => void } => {
    const wait = { done, resolve: () => {} };
    const promise = new Promise<void>((resolve) => {
      wait.resolve = resolve;
      if (done()) resolve();
      else waits.add(wait);
    });
    return { promise, cancel: () => waits.delete(wait) };
  };
  return {
    get seen() {
      return seen;
    },
    renewed: (event) => {
      seen++;
      byKey.set(event.key, (byKey.get(event.key) ?? 0) + 1);
      for (const wait of waits) {
        if (!wait.done()) continue;
        waits.delete(wait);
        wait.resolve();
      }
    },
    reached: (count) => until(() => seen >= count).promise,
    async more(leases, n, timeoutMs) {
      const target = new Map(leases.map((lease) => [lease.key, (byKey.get(lease.key) ?? 0) + n]));
      const short = (): string[] => leases.filter((lease) => (byKey.get(lease.key) ?? 0) < target.get(lease.key)!).map((lease) => lease.key);
      const wait = until(() => short().length === 0);
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`not renewed ${n} more times within ${timeoutMs} ms: ${short().join(', ')}`)), timeoutMs);
      });
      try {
        await Promise.race([wait.promise, timedOut]);
      } finally {
        clearTimeout(timer);
        wait.cancel();
      }
    },
  };
}
