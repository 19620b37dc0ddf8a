/** An ioredis `Command` (5 or 6): its argument list is public (`command.args`). */
interface CommandLike {
  args: unknown[];
}
type CommandClass = new (name: string, args: unknown[], options: object) => CommandLike;

/**
 * The part of an ioredis client (5 or 6) that {@link scriptSender} uses: `sendCommand` (public API:
 * `redis.sendCommand(new Redis.Command(...))`), `call` (to find the `Command` class the client
 * builds), its script methods and the options that change how a command is built.
 */
interface SendsCommands {
  sendCommand?(command: never): Promise<unknown>;
  call(command: string, ...args: string[]): Promise<unknown>;
  evalsha(sha: string, numKeys: number, ...keysAndArgs: (string | readonly string[])[]): Promise<unknown>;
  eval(source: string, numKeys: number, ...keysAndArgs: (string | readonly string[])[]): Promise<unknown>;
  options?: object;
  isCluster?: boolean;
}

/** The options under which ioredis builds a command in a way that {@link scriptSender} does not. */
interface BuildOptions {
  keyPrefix?: unknown;
  showFriendlyErrorStack?: unknown;
  enableAutoPipelining?: unknown;
}

const NO_ARGS: unknown[] = [];
const UTF8 = { replyEncoding: 'utf8' };

/** Sends EVALSHA or EVAL with its keys and arguments, as `client.evalsha(sha, keys.length, keys, args)` would. */
export type ScriptSender = (name: 'evalsha' | 'eval', script: string, keys: readonly string[], args: readonly string[]) => Promise<unknown>;

/**
 * A cheaper way to send a script call on an ioredis `Redis` client, or `undefined` when it does not
 * apply (a `Cluster`, a client without a `Command` class).
 *
 * ioredis's `Command` constructor copies its argument list with `Array.prototype.flat()`, which in
 * V8 is a generic loop: about 1.2 µs for a script call of six arguments here (`node
 * bench/ab.mjs`'s CPU profile put the constructor at a tenth of a lone caller's Node time). Here the
 * command is built with no arguments and given its flat argument list, built once, before it is
 * sent through the client's own `sendCommand` (its offline queue, its timeouts, its reconnects: all
 * as for any command). The client's `evalsha` method is used instead whenever its options change
 * how a command is built: a `keyPrefix` (prefixed keys), `showFriendlyErrorStack` (a stack taken
 * per call) or `enableAutoPipelining` (a pipeline per turn).
 */
export function scriptSender(client: SendsCommands): ScriptSender | undefined {
  if (client.isCluster === true || typeof client.sendCommand !== 'function' || builtOtherwise(client)) return undefined;
  const Built = commandClass(client);
  if (!Built) return undefined;
  const send = client.sendCommand.bind(client) as unknown as (command: CommandLike) => Promise<unknown>;
  // The last command sent, kept until the next: with none alive at a full GC, V8 would drop the
  // shapes ioredis's Command objects take and throw away the optimized code of ioredis's send and
  // reply path that embeds them (see manager/last-made.ts).
  const kept: { last: CommandLike | undefined } = { last: undefined };
  return (name, script, keys, args) => {
    if (builtOtherwise(client)) return client[name](script, keys.length, keys, args);
    const command = new Built(name, NO_ARGS, UTF8);
    // All strings, as the command's constructor would have made them (stringifyArguments).
    const all: unknown[] = [script, String(keys.length)];
    for (let i = 0; i < keys.length; i++) all.push(keys[i]);
    for (let i = 0; i < args.length; i++) all.push(args[i]);
    command.args = all;
    kept.last = command;
    return send(command);
  };
}

function builtOtherwise(client: SendsCommands): boolean {
  const o = (client.options ?? {}) as BuildOptions;
  return Boolean(o.keyPrefix || o.showFriendlyErrorStack || o.enableAutoPipelining);
}

/**
 * The `Command` class `client` builds its commands with (ioredis exports it as `Redis.Command`, but
 * a client's `constructor` is not `Redis`: ioredis mixes EventEmitter in). Found without sending
 * anything: for one synchronous call, the client's own `sendCommand` is shadowed by one that only
 * records the command it is given, then the client is left as it was.
 */
function commandClass(client: SendsCommands): CommandClass | undefined {
  const target = client as unknown as Record<string, unknown>;
  const had = Object.prototype.hasOwnProperty.call(target, 'sendCommand');
  const own = target['sendCommand'];
  let found: unknown;
  target['sendCommand'] = (command: object) => {
    found = command.constructor;
    return new Promise(() => {});
  };
  try {
    void client.call('PING');
  } catch {
    found = undefined;
  } finally {
    if (had) target['sendCommand'] = own;
    else delete target['sendCommand'];
  }
  if (typeof found !== 'function') return undefined;
  const Built = found as CommandClass;
  try {
    return Array.isArray(new Built('evalsha', NO_ARGS, UTF8).args) ? Built : undefined;
  } catch {
    return undefined;
  }
}
