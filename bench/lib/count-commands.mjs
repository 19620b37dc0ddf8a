// Counts the commands a process sends to Redis through ioredis: every command goes through
// Redis.prototype.sendCommand (a script call, a SET, a SUBSCRIBE on a subscriber made with
// duplicate(), pipelined commands alike), so wrapping it counts round trips, the commands Redis
// runs inside a script not included (INFO commandstats counts those too). Call it in a process
// whose every ioredis client belongs to the code under test: the harness's own clients live in
// another process. A command that ioredis sends again after a reconnect counts twice.
import { importIoredis } from './clients.mjs';

/**
 * Wraps sendCommand of the chosen ioredis major. Returns { count(): number of commands sent so
 * far, onFirstReply(keyOf, cb) }: `cb(key)` is called once per key, the first time a reply other
 * than an error comes to a command whose key is `keyOf(command)` (undefined: not one to follow).
 */
export async function countCommands() {
  const { Redis } = await importIoredis();
  const original = Redis.prototype.sendCommand;
  let sent = 0;
  let follow;
  Redis.prototype.sendCommand = function sendCommand(command, ...rest) {
    sent++;
    if (follow) {
      const key = follow.keyOf(command);
      if (key !== undefined && !follow.seen.has(key)) {
        // An error reply (NOSCRIPT before a script is loaded: the client sends it again) is not an answer.
        command.promise?.then(
          () => follow.answered(key),
          () => {},
        );
      }
    }
    return original.call(this, command, ...rest);
  };
  return {
    count: () => sent,
    /** Calls `cb(key)` the first time a command about `key` (as `keyOf` reads it) is answered. */
    onFirstReply(keyOf, cb) {
      const seen = new Set();
      follow = {
        keyOf,
        seen,
        answered(key) {
          if (seen.has(key)) return;
          seen.add(key);
          cb(key);
        },
      };
    },
  };
}

/** The first key of an ioredis command: after the sha (or script) and key count of EVALSHA/EVAL, else its first argument. */
export function firstKey(command) {
  const name = String(command.name).toLowerCase();
  const args = command.args ?? [];
  const value = name.startsWith('eval') || name.startsWith('fcall') ? (Number(args[1]) > 0 ? args[2] : undefined) : args[0];
  return value === undefined ? undefined : String(value);
}
