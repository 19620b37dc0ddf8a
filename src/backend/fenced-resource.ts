import type { ScriptClient } from '../client/script-client.js';
import { BackendError } from '../errors.js';
import { asInteger, asPair, runScript } from '../lua/run-script.js';
import { fencedReadScript, fencedWriteScript } from '../lua/scripts.generated.js';
import type { FencedValue, FencedWriteReply } from './backend.js';

/** fenced-write.lua on one Redis: shared by every backend whose resources live on a single client. */
export async function writeFenced(client: ScriptClient, resource: string, value: string, fence: number): Promise<FencedWriteReply> {
  const reply = await runScript(client, fencedWriteScript, [resource], [value, String(fence)]);
  const [status, highest] = asPair(reply, fencedWriteScript);
  return { accepted: status === 1, highest };
}

/** fenced-read.lua on one Redis: the value and the fence it was written with, or null. */
export async function readFenced(client: ScriptClient, resource: string): Promise<FencedValue | null> {
  const reply = await runScript(client, fencedReadScript, [resource], []);
  if (reply === null || reply === undefined) return null;
  if (Array.isArray(reply) && reply.length === 2 && typeof reply[0] === 'string') {
    return { value: reply[0], fence: asInteger(reply[1], fencedReadScript) };
  }
  throw new BackendError('fencedRead', `unexpected reply ${JSON.stringify(reply)}`);
}
