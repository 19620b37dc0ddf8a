import type { Inbox } from './backend.js';
import { NodeTimeoutError } from './redlock-fan-out.js';
import type { RedisBackend } from './redis-backend.js';

/** Longest wait for one node's subscription when the inbox opens, ms (a hung node never completes it). */
const INBOX_WAIT = 1000;

/**
 * The inbox of a manager on Redlock: one subscription on each node, its listener told of the
 * grants of any of them. A hung node never completes its subscription: each is waited for a
 * bounded time, and the late ones are added when they come (or closed, if the inbox was closed
 * meanwhile). Rejects only when no node's subscription opened in time.
 */
export async function watchEveryInbox(
  nodes: readonly RedisBackend[],
  managerId: string,
  listener: (member?: string, fence?: number) => void,
): Promise<Inbox> {
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
    // A node's subscriber that ended for good leaves the whole not listening: it is opened again.
    ended: () => inboxes.some((inbox) => inbox.ended?.() === true),
  };
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
