import type { ScriptClient, SubscriberConnection } from '../client/script-client.js';

/**
 * One subscriber connection per manager, shared by every lock the process waits for: channels
 * are subscribed while someone listens and unsubscribed when the last listener leaves. The
 * connection is made on first use and closed by {@link ReleaseHub.close}.
 */
export class ReleaseHub {
  readonly #client: ScriptClient;
  #connection: Promise<SubscriberConnection> | undefined;
  readonly #listeners = new Map<string, Set<() => void>>();
  /** Per channel, the subscribe or unsubscribe in flight, so they apply in order. */
  readonly #pending = new Map<string, Promise<void>>();
  #closed = false;

  constructor(client: ScriptClient) {
    this.#client = client;
  }

  /** Resolves when `channel` is subscribed; the returned function stops listening. */
  async watch(channel: string, listener: () => void): Promise<() => void> {
    const connection = await this.#connect();
    let set = this.#listeners.get(channel);
    const first = !set;
    if (!set) this.#listeners.set(channel, (set = new Set()));
    set.add(listener);
    if (first) {
      this.#chain(channel, () => connection.subscribe(channel));
    }
    try {
      await this.#pending.get(channel);
    } catch (error) {
      this.#remove(channel, listener, connection);
      throw error;
    }
    return () => this.#remove(channel, listener, connection);
  }

  async close(): Promise<void> {
    this.#closed = true;
    const connection = this.#connection;
    this.#connection = undefined;
    this.#listeners.clear();
    if (connection) await (await connection.catch(() => undefined))?.close();
  }

  /** How many channels have listeners (for tests that check nothing is left behind). */
  get channelCount(): number {
    return this.#listeners.size;
  }

  #remove(channel: string, listener: () => void, connection: SubscriberConnection): void {
    const set = this.#listeners.get(channel);
    if (!set || !set.delete(listener) || set.size > 0) return;
    this.#listeners.delete(channel);
    if (!this.#closed) this.#chain(channel, () => connection.unsubscribe(channel)).catch(() => {});
  }

  #chain(channel: string, step: () => Promise<void>): Promise<void> {
    const previous = this.#pending.get(channel) ?? Promise.resolve();
    const next = previous.catch(() => {}).then(step);
    this.#pending.set(channel, next);
    const clear = (): void => {
      if (this.#pending.get(channel) === next) this.#pending.delete(channel);
    };
    next.then(clear, clear);
    return next;
  }

  #connect(): Promise<SubscriberConnection> {
    if (!this.#connection) {
      const made = this.#client.createSubscriber().then((connection) => {
        connection.onMessage((channel) => this.#fire(channel));
        // Messages published while the connection was down are lost: wake everyone to look again.
        connection.onReconnect(() => {
          for (const channel of [...this.#listeners.keys()]) this.#fire(channel);
        });
        return connection;
      });
      made.catch(() => {
        if (this.#connection === made) this.#connection = undefined;
      });
      this.#connection = made;
    }
    return this.#connection;
  }

  #fire(channel: string): void {
    const set = this.#listeners.get(channel);
    if (set) for (const listener of [...set]) listener();
  }
}
