import type { ScriptClient, SubscriberConnection } from '../client/script-client.js';
import { BackendError } from '../errors.js';

/**
 * A manager's inbox on Redis: one subscriber connection (a duplicate of the user's client, made
 * on first use) listening on one channel, whatever the number of locks the process waits for.
 * A release that reserves a lock for one of the manager's waiters publishes the waiter's name
 * there, so only that waiter wakes.
 */
export async function openInbox(
  client: ScriptClient,
  channel: string,
  listener: (member: string | undefined) => void,
): Promise<() => Promise<void>> {
  let connection: SubscriberConnection | undefined;
  try {
    connection = await client.createSubscriber();
    connection.onMessage((from, message) => {
      if (from === channel) listener(message);
    });
    // Messages published while the connection was down are lost: every waiter looks again.
    connection.onReconnect(() => listener(undefined));
    await connection.subscribe(channel);
  } catch (error) {
    await connection?.close().catch(() => {});
    throw new BackendError('subscribe', error instanceof Error ? error.message : String(error), { cause: error });
  }
  const open = connection;
  return () => open.close();
}
