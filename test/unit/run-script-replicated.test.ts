/**
 * runScriptReplicated counts a WAIT only when it ran on the connection its script ran on: the
 * connection's identity (server run_id and CLIENT ID) is read before the script and after the
 * WAIT. A fake client stands in for the driver, to make a reconnect between them at will.
 */
import { describe, expect, it } from 'vitest';
import { connectionIdOf, type ScriptClient } from '../../src/client/script-client.js';
import { extendScript } from '../../src/lua/scripts.generated.js';
import { runScriptReplicated } from '../../src/lua/run-script.js';

function fakeClient(ids: ReadonlyArray<string | Error>, acks: number): ScriptClient {
  const queue = [...ids];
  return {
    driver: 'ioredis',
    cluster: false,
    evalsha: async () => 1,
    eval: async () => 1,
    waitReplicas: async () => acks,
    connectionId: async () => {
      const id = queue.shift()!;
      if (id instanceof Error) throw id;
      return id;
    },
    scan: async () => [],
    createSubscriber: async () => {
      throw new Error('not used');
    },
    close: async () => {},
  };
}

const run = (client: ScriptClient): Promise<[unknown, number]> => runScriptReplicated(client, extendScript, ['k'], ['token', '1000'], 1, 100);

describe('replica acknowledgement over a reconnect', () => {
  it('counts the WAIT when script and WAIT ran on one connection', async () => {
    expect(await run(fakeClient(['r1:7', 'r1:7'], 1))).toEqual([1, 1]);
  });

  it('counts no acknowledgement when the WAIT ran on another connection: another server with the same client id, or the same server', async () => {
    // Two servers number their clients alike: client 7 on the old primary and on the new one.
    expect(await run(fakeClient(['r1:7', 'r2:7'], 1))).toEqual([1, 0]);
    expect(await run(fakeClient(['r1:7', 'r1:9'], 1))).toEqual([1, 0]);
  });

  it('skips the check when the identity cannot be read (INFO refused by an ACL)', async () => {
    const refused = new Error("NOPERM User locker has no permissions to run the 'info' command");
    expect(await run(fakeClient([refused, refused], 1))).toEqual([1, 1]);
  });

  it('reads the identity from INFO server and CLIENT ID replies', () => {
    expect(connectionIdOf('# Server\r\nredis_version:7.0.15\r\nrun_id:4fa1c0de\r\ntcp_port:6379\r\n', 12)).toBe('4fa1c0de:12');
  });
});
