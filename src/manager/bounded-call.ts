/**
 * The bound of the calls that have no wait of their own (`inspect`, `list`, `forceRelease`,
 * `fencedWrite`, `fencedRead`): like every other call, they answer on latchkey's clock, whatever
 * the client's retry settings (a server that accepts the connection and never answers would
 * otherwise hold them for ever).
 */
import type { Backend } from '../backend/backend.js';
import { CALL_BOUND, isClientTimeout } from '../client/script-client.js';
import { now } from '../clock.js';
import { settleBy } from '../deadlines.js';
import { UnreachableError } from '../errors.js';

export { CALL_BOUND };

/**
 * `call`'s outcome, or an {@link UnreachableError} once it has had no reply for {@link CALL_BOUND}
 * ms. The call is not withdrawn: it may still run when Redis answers again.
 */
export function boundedCall<T>(backend: Pick<Backend, 'server' | 'lastError'>, operation: string, what: string, call: Promise<T>): Promise<T> {
  const started = now();
  const unreachable = (cause?: unknown): UnreachableError => new UnreachableError(operation, what, backend.server, now() - started, cause ?? backend.lastError?.());
  // The client's own timeout (node-redis's, GLIDE's, ioredis's commandTimeout) says the same, first.
  const answered = call.catch((error: unknown) => {
    throw isClientTimeout(error) ? unreachable(error) : error;
  });
  return settleBy(answered, started + CALL_BOUND, () => unreachable());
}
