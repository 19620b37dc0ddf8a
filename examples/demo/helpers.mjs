// Part of examples/demo.mjs (the README's quick-start demo): the small helpers that both the demo's
// entry point and examples/demo/find-redis.mjs use.

/** Fail fast instead of reconnecting forever when a server is down. */
export const REDIS_OPTIONS = { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null, connectTimeout: 1000 };

/** An error's name and message, never a stack or a lease token. */
export function describe(error) {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  return String(error);
}
