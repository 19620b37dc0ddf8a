import type { ScriptClient, SubscriberConnection } from './script-client.js';

/** The parts of an ioredis `Redis` client latchkey uses. */
export interface IoredisLike {
  evalsha(sha: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  eval(source: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  defineCommand(...args: never[]): unknown;
  duplicate(...args: never[]): IoredisLike;
  quit(): Promise<unknown>;
  disconnect(): void;
  status?: string;
  on(event: string, listener: (...args: never[]) => void): unknown;
  subscribe(...channels: string[]): Promise<unknown>;
  unsubscribe(...channels: string[]): Promise<unknown>;
  pipeline(): IoredisPipeline;
}

/** The parts of an ioredis pipeline latchkey uses. */
export interface IoredisPipeline {
  evalsha(sha: string, numKeys: number, ...keysAndArgs: string[]): unknown;
  exec(): Promise<Array<[Error | null, unknown]> | null>;
}

interface Pending {
  readonly sha: string;
  readonly keys: readonly string[];
  readonly args: readonly string[];
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

/**
 * Sends the scripts called in one turn of the event loop as one pipeline: one write and one
 * system call instead of one each, which is what many concurrent locks cost. A lone call is sent
 * as it is, with no added delay beyond the current turn. Uses the client's public `pipeline()`
 * API; the client itself is not changed.
 */
function batchedEvalsha(client: IoredisLike): ScriptClient['evalsha'] {
  let batch: Pending[] | undefined;
  const flush = (): void => {
    const calls = batch!;
    batch = undefined;
    if (calls.length === 1) {
      const [c] = calls as [Pending];
      client.evalsha(c.sha, c.keys.length, ...c.keys, ...c.args).then(c.resolve, c.reject);
      return;
    }
    const pipeline = client.pipeline();
    for (const c of calls) pipeline.evalsha(c.sha, c.keys.length, ...c.keys, ...c.args);
    pipeline.exec().then(
      (results) => {
        calls.forEach((c, i) => {
          const [error, value] = results?.[i] ?? [new Error('the pipeline returned no reply'), undefined];
          if (error) c.reject(error);
          else c.resolve(value);
        });
      },
      (error: unknown) => {
        for (const c of calls) c.reject(error);
      },
    );
  };
  return (sha, keys, args) =>
    new Promise((resolve, reject) => {
      if (!batch) {
        batch = [];
        process.nextTick(flush);
      }
      batch.push({ sha, keys, args, resolve, reject });
    });
}

export function isIoredis(client: unknown): client is IoredisLike {
  const c = client as Partial<IoredisLike> | null;
  return (
    typeof c === 'object' &&
    c !== null &&
    typeof c.evalsha === 'function' &&
    typeof c.pipeline === 'function' &&
    typeof c.defineCommand === 'function' &&
    typeof c.duplicate === 'function'
  );
}

export function ioredisAdapter(client: IoredisLike, owned: boolean): ScriptClient {
  return {
    driver: 'ioredis',
    evalsha: batchedEvalsha(client),
    eval: (source, keys, args) => client.eval(source, keys.length, ...keys, ...args),
    createSubscriber: async () => ioredisSubscriber(client.duplicate()),
    close: async () => {
      if (!owned) return;
      try {
        await client.quit();
      } catch {
        client.disconnect();
      }
    },
  };
}

async function ioredisSubscriber(sub: IoredisLike): Promise<SubscriberConnection> {
  // A subscriber we own: its errors are reported through reconnects, never as an unhandled 'error' event.
  sub.on('error', () => {});
  let connectedOnce = false;
  const reconnectListeners: Array<() => void> = [];
  sub.on('ready', () => {
    if (connectedOnce) for (const l of reconnectListeners) l();
    connectedOnce = true;
  });
  return {
    subscribe: async (channel) => {
      await sub.subscribe(channel);
    },
    unsubscribe: async (channel) => {
      await sub.unsubscribe(channel);
    },
    onMessage: (listener) => {
      sub.on('message', ((channel: string, message: string) => listener(channel, message)) as (...args: never[]) => void);
    },
    onReconnect: (listener) => {
      reconnectListeners.push(listener);
    },
    close: async () => {
      try {
        await sub.quit();
      } catch {
        sub.disconnect();
      }
    },
  };
}
