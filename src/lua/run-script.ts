import type { ScriptClient } from '../client/script-client.js';
import { isNoScript, isWrongType } from '../client/script-client.js';
import { BackendError, WrongTypeError } from '../errors.js';
import type { LuaScript } from './lua-script.js';

/**
 * Runs a script with EVALSHA, falling back to EVAL when the server's script cache does not have
 * it (NOSCRIPT: after a restart, a failover or SCRIPT FLUSH). EVAL caches it again.
 * Driver errors become {@link BackendError}s (or {@link WrongTypeError}) with the original as `cause`.
 */
export function runScript(client: ScriptClient, script: LuaScript, keys: readonly string[], args: readonly string[]): Promise<unknown>;
/** With `parse`: resolves to the parsed reply, in the same promise step (one fewer on every operation's path). */
export function runScript<T>(client: ScriptClient, script: LuaScript, keys: readonly string[], args: readonly string[], parse: (reply: unknown) => T | PromiseLike<T>): Promise<T>;
export function runScript(client: ScriptClient, script: LuaScript, keys: readonly string[], args: readonly string[], parse?: (reply: unknown) => unknown): Promise<unknown> {
  // Promise chains rather than an async function: this is every operation's hot path.
  let sent: Promise<unknown>;
  try {
    checkArity(script, keys, args);
    sent = client.evalsha(script.sha, keys, args);
  } catch (error) {
    return Promise.reject(error instanceof BackendError ? error : scriptError(script, keys, error));
  }
  return sent.then(parse, (error: unknown) => {
    if (!isNoScript(error)) throw scriptError(script, keys, error);
    return client.eval(script.source, keys, args).then(parse, (retried: unknown) => {
      throw scriptError(script, keys, retried);
    });
  });
}

/** A driver error as latchkey reports it: {@link WrongTypeError} or {@link BackendError}, with the original as `cause`. */
function scriptError(script: LuaScript, keys: readonly string[], error: unknown): Error {
  const operation = operationOf(script);
  if (isWrongType(error)) return new WrongTypeError(operation, keys[0] ?? '', error);
  return new BackendError(operation, describeCause(error), { cause: error });
}

/**
 * The operation a script's error names, as the caller knows it: a lone caller's release runs
 * release-key.lua and a batch of renewals extend-many.lua, but the caller released or extended.
 */
const OPERATIONS: Readonly<Record<string, string>> = { releaseKey: 'release', extendMany: 'extend' };

function operationOf(script: LuaScript): string {
  return OPERATIONS[script.name] ?? script.name;
}

/**
 * Runs a script and, pipelined right behind it on the same connection, `WAIT replicas timeout`:
 * one round trip plus the replication wait, not two round trips. Resolves to the script's reply
 * and the number of replicas that acknowledged its writes.
 *
 * The connection's identity (the server's run_id and the CLIENT ID) before the script and after
 * the WAIT proves that both ran on one connection: a driver that reconnects re-sends the commands
 * still unanswered (ioredis does), and a WAIT sent again on a new connection, maybe to a new
 * primary after a failover, covers no write of the script and may be answered at once. Then the
 * acknowledgements count as 0. (When the identity cannot be read, the check is skipped.)
 */
export async function runScriptReplicated(
  client: ScriptClient,
  script: LuaScript,
  keys: readonly string[],
  args: readonly string[],
  replicas: number,
  timeout: number,
): Promise<[unknown, number]> {
  checkArity(script, keys, args);
  const run = async (send: () => Promise<unknown>): Promise<[unknown, number]> => {
    // An identity that cannot be read (INFO refused by an ACL: `-@dangerous`) skips the check.
    const identity = (): Promise<string | undefined> | undefined => client.connectionId?.().catch(() => undefined);
    const before = identity();
    const reply = send();
    const acks = client.waitReplicas(replicas, timeout);
    const after = identity();
    acks.catch(() => {}); // reported below, after the script's own error if it has one
    const result = await reply;
    const acknowledged = await acks;
    const [first, last] = await Promise.all([before, after]);
    return [result, first === undefined || last === undefined || first === last ? acknowledged : 0];
  };
  try {
    try {
      return await run(() => client.evalsha(script.sha, keys, args));
    } catch (error) {
      if (!isNoScript(error)) throw error;
      return await run(() => client.eval(script.source, keys, args));
    }
  } catch (error) {
    throw scriptError(script, keys, error);
  }
}

/** A call must pass exactly the keys and arguments the script's contract header declares. */
function checkArity(script: LuaScript, keys: readonly string[], args: readonly string[]): void {
  const perItem = script.keysPerItem ?? 0;
  const items = keys.length - script.numberOfKeys;
  const optionalKeys = script.optionalKeys ?? 0;
  const optionalArgs = script.optionalArgs ?? 0;
  const keysMatch =
    perItem > 0 ? items >= perItem && items % perItem === 0 : keys.length <= script.numberOfKeys && keys.length >= script.numberOfKeys - optionalKeys;
  const argsPerItem = script.argsPerItem ?? 0;
  const argsMatch =
    argsPerItem > 0
      ? perItem > 0 && args.length === script.numberOfArgs + (items / perItem) * argsPerItem
      : args.length <= script.numberOfArgs && args.length >= script.numberOfArgs - optionalArgs;
  if (!keysMatch || !argsMatch) {
    const range = (n: number, optional: number): string => (optional > 0 ? `${n - optional} to ${n}` : String(n));
    const declared = perItem > 0 ? `${script.numberOfKeys} + ${perItem} per item` : range(script.numberOfKeys, optionalKeys);
    const declaredArgs = argsPerItem > 0 ? `${script.numberOfArgs} + ${argsPerItem} per item` : range(script.numberOfArgs, optionalArgs);
    throw new BackendError(
      script.name,
      `called with ${keys.length} keys and ${args.length} arguments, but its header declares ${declared} and ${declaredArgs} (a latchkey bug: please report it)`,
    );
  }
}

function describeCause(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  if (error.message) return error.message;
  // Node's AggregateError for a connection refused on every address (node-redis passes it on) has
  // no message of its own: its errors', or its code, say what happened.
  const inner = error instanceof AggregateError ? (error.errors as unknown[]).map(describeCause).filter(Boolean) : [];
  const code = (error as { code?: unknown }).code;
  return inner.length > 0 ? [...new Set(inner)].join('; ') : typeof code === 'string' ? code : error.constructor.name || error.name;
}

/** Narrows a script's integer reply. */
export function asInteger(reply: unknown, script: LuaScript): number {
  if (typeof reply === 'number' && Number.isInteger(reply)) return reply;
  if (typeof reply === 'string' && /^-?\d+$/.test(reply)) return Number(reply);
  throw new BackendError(script.name, `unexpected reply ${JSON.stringify(reply)} (expected an integer)`);
}

/** Narrows a script's `{status, number}` reply. */
export function asPair(reply: unknown, script: LuaScript): [number, number] {
  if (Array.isArray(reply) && reply.length === 2) {
    return [asInteger(reply[0], script), asInteger(reply[1], script)];
  }
  throw new BackendError(script.name, `unexpected reply ${JSON.stringify(reply)} (expected a pair of integers)`);
}
