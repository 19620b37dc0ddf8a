import type { Redis } from 'ioredis';

/**
 * Resolves once the sorted set `queueKey` (a lock's wait queue) on the server `admin` talks to
 * holds at least `count` entries; rejects after `timeoutMs`. For a test that needs a waiter
 * queued before the holder releases: it waits on the server's keyspace notifications for the key
 * (turned on here for sorted sets, on that server), not on time.
 */
export async function queuedOn(admin: Redis, queueKey: string, count: number, timeoutMs: number): Promise<void> {
  await admin.config('SET', 'notify-keyspace-events', 'Kz');
  const sub = admin.duplicate();
  let timer: NodeJS.Timeout | undefined;
  try {
    let check: () => void = () => {};
    const reached = new Promise<void>((resolve, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms waiting for ${count} entries in ${queueKey}`)), timeoutMs);
      check = () => {
        admin.zcard(queueKey).then((n) => n >= count && resolve(), reject);
      };
    });
    sub.on('message', () => check());
    await sub.subscribe(`__keyspace@0__:${queueKey}`);
    check(); // queued before the subscription listened
    await reached;
  } finally {
    clearTimeout(timer);
    sub.disconnect();
  }
}
