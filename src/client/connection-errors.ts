/**
 * The last connection error a client reported, for the `cause` of an UnreachableError: a Redis
 * that refuses connections is then reported as "connect ECONNREFUSED 127.0.0.1:6390", not only as
 * "no reply". Cleared when the connection is ready again.
 */

/** What a client's events look like: ioredis, iovalkey and node-redis clients are EventEmitters. */
export interface ErrorEmitter {
  on(event: string, listener: (...args: never[]) => void): unknown;
  removeListener?(event: string, listener: (...args: never[]) => void): unknown;
  listenerCount?(event: string): number;
}

/** The last error seen on one or more connections, and a way to stop listening. */
export interface ConnectionErrors {
  /** The most recent error of any watched connection that has not been ready since, if any. */
  last(): Error | undefined;
  /** Watches one more connection (latchkey's own subscriber, say); the function returned stops that. */
  watch(emitter: ErrorEmitter): () => void;
  /** Stops listening to every watched connection (a borrowed client outlives the manager). */
  detach(): void;
}

/**
 * Watches `emitter` for its connection errors. A borrowed client is watched only when it already has
 * an 'error' listener of its user's: a listener of ours would otherwise silence the client's own
 * report of an unhandled error (ioredis prints one when nobody listens).
 */
export function connectionErrors(emitter: ErrorEmitter | undefined, owned: boolean): ConnectionErrors {
  const latest = new Map<ErrorEmitter, Error>();
  const detachers = new Set<() => void>();
  const watch = (target: ErrorEmitter): (() => void) => {
    const onError = (error: unknown): void => {
      if (!(error instanceof Error)) return;
      latest.delete(target); // the newest error last
      latest.set(target, error);
    };
    const onReady = (): void => {
      latest.delete(target);
    };
    target.on('error', onError as (...args: never[]) => void);
    target.on('ready', onReady);
    const detach = (): void => {
      target.removeListener?.('error', onError as (...args: never[]) => void);
      target.removeListener?.('ready', onReady);
      latest.delete(target);
      detachers.delete(detach);
    };
    detachers.add(detach);
    return detach;
  };
  if (emitter && (owned || (emitter.listenerCount?.('error') ?? 0) > 0)) watch(emitter);
  return {
    last: () => {
      let last: Error | undefined;
      for (const error of latest.values()) last = error;
      return last;
    },
    watch,
    detach: () => {
      for (const d of [...detachers]) d();
    },
  };
}
