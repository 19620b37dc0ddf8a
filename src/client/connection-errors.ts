/**
 * The last connection error a client reported, for the `cause` of an UnreachableError: a Redis
 * that refuses connections is then reported as "connect ECONNREFUSED 127.0.0.1:6390", not only as
 * "no reply". Cleared when the connection is ready again.
 *
 * One pair of listeners per client, however many managers share it: a process that builds a
 * manager per tenant over one borrowed client would otherwise pass Node's listener limit and get a
 * MaxListenersExceededWarning.
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

/** The shared watch on one connection: its last error, when it came, and how many watch it. */
interface Watched {
  error: Error | undefined;
  at: number;
  users: number;
  stop(): void;
}

const watched = new WeakMap<ErrorEmitter, Watched>();
let sequence = 0;

function share(target: ErrorEmitter): Watched {
  const existing = watched.get(target);
  if (existing) {
    existing.users += 1;
    return existing;
  }
  const entry: Watched = { error: undefined, at: 0, users: 1, stop: () => undefined };
  const onError = (error: unknown): void => {
    if (!(error instanceof Error)) return;
    entry.error = error;
    entry.at = ++sequence;
  };
  const onReady = (): void => {
    entry.error = undefined;
  };
  target.on('error', onError as (...args: never[]) => void);
  target.on('ready', onReady);
  entry.stop = () => {
    target.removeListener?.('error', onError as (...args: never[]) => void);
    target.removeListener?.('ready', onReady);
    watched.delete(target);
  };
  watched.set(target, entry);
  return entry;
}

function unshare(entry: Watched): void {
  entry.users -= 1;
  if (entry.users === 0) entry.stop();
}

/**
 * Watches `emitter` for its connection errors. A borrowed client is watched only when it already has
 * an 'error' listener of its user's: a listener of ours would otherwise silence the client's own
 * report of an unhandled error (ioredis prints one when nobody listens).
 */
export function connectionErrors(emitter: ErrorEmitter | undefined, owned: boolean): ConnectionErrors {
  const mine = new Map<ErrorEmitter, Watched>();
  const watch = (target: ErrorEmitter): (() => void) => {
    if (mine.has(target)) return () => undefined;
    const entry = share(target);
    mine.set(target, entry);
    return () => {
      if (mine.get(target) !== entry) return;
      mine.delete(target);
      unshare(entry);
    };
  };
  if (emitter && (owned || (emitter.listenerCount?.('error') ?? 0) > 0)) watch(emitter);
  return {
    last: () => {
      let last: Watched | undefined;
      for (const entry of mine.values()) {
        if (entry.error && (!last || entry.at > last.at)) last = entry;
      }
      return last?.error;
    },
    watch,
    detach: () => {
      for (const [target, entry] of [...mine]) {
        mine.delete(target);
        unshare(entry);
      }
    },
  };
}
