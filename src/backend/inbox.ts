import type { ScriptClient, SubscriberConnection } from '../client/script-client.js';
import { BackendError } from '../errors.js';
import { parseGrant } from './backend.js';

/**
 * A manager's inbox on Redis: one subscriber connection (a duplicate of the user's client, made
 * on first use) listening on one channel, whatever the number of locks the process waits for.
 * A release that grants a lock to one of the manager's waiters publishes `"<waiter> <fence>"`
 * there, so only that waiter wakes, and it needs no round trip to learn it holds the lock.
 */
export async function openInbox(
  client: ScriptClient,
  channel: string,
  listener: (member?: string, fence?: number) => void,
): Promise<() => Promise<void>> {
  let connection: SubscriberConnection | undefined;
  try {
    connection = await client.createSubscriber();
    connection.onMessage((from, message) => {
      const grant = from === channel ? parseGrant(message) : undefined;
      if (grant) listener(grant.member, grant.fence);
    });
    // Messages published while the connection was down are lost: every waiter looks again.
    connection.onReconnect(() => listener());
    await connection.subscribe(channel);
  } catch (error) {
    await connection?.close().catch(() => {});
    throw new BackendError('subscribe', error instanceof Error ? error.message : String(error), { cause: error });
  }
  const open = connection;
  return () => open.close();
}
