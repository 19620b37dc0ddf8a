/**
 * The script calls latchkey builds itself on an ioredis client (src/client/ioredis-commands.ts):
 * on ioredis 5 and 6 and iovalkey, the command class is found without sending anything and the
 * client is left as it was; the calls reach Redis as the client's own `evalsha` sends them; and a
 * client whose options change how a command is built (a `keyPrefix`, auto-pipelining, friendly
 * error stacks) gets its own `evalsha`, so that its keys keep their prefix.
 */
import { Valkey } from 'iovalkey';
import { Redis as Redis6 } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scriptSender } from '../../src/client/ioredis-commands.js';
import { createLocks } from '../../src/index.js';
import { IOREDIS_5, IOREDIS_6, IOREDIS_6_RESP2, type IoredisFamilyClient } from '../helpers/client-cells.js';
import { rawClient, uniquePrefix } from '../helpers/harness.js';
import { RedisServer } from '../helpers/redis-server.js';

let server: RedisServer;
const opened: Array<{ disconnect(): void }> = [];

beforeAll(async () => {
  server = await RedisServer.start();
});

afterAll(async () => {
  for (const c of opened) c.disconnect();
  await server.stop();
});

const ECHO_KEYS = "return {KEYS[1], KEYS[2], ARGV[1], ARGV[2], #KEYS, #ARGV}";

const cells: Array<{ label: string; make: (port: number) => IoredisFamilyClient }> = [
  IOREDIS_6,
  IOREDIS_6_RESP2,
  IOREDIS_5,
  { label: 'iovalkey', make: (port) => new Valkey(port, '127.0.0.1') as unknown as IoredisFamilyClient },
];

describe.each(cells)('on $label', (cell) => {
  it('finds the command class without sending anything, leaves the client as it was, and sends what evalsha sends', async () => {
    const client = cell.make(server.port);
    opened.push(client);
    await client.call('PING');
    const raw = client as unknown as Record<string, unknown> & Parameters<typeof scriptSender>[0];
    const sentBefore = Number(/total_commands_processed:(\d+)/.exec(String(await client.call('INFO', 'stats')))![1]);
    const send = scriptSender(raw);
    const sentAfter = Number(/total_commands_processed:(\d+)/.exec(String(await client.call('INFO', 'stats')))![1]);
    expect(send).toBeTypeOf('function');
    expect(sentAfter - sentBefore).toBe(1); // the second INFO: the search for the class sent nothing
    expect(Object.prototype.hasOwnProperty.call(raw, 'sendCommand')).toBe(false);

    const sha = String(await client.call('SCRIPT', 'LOAD', ECHO_KEYS));
    const direct = await send!('evalsha', sha, ['k:{1}', 'k:{1}:x'], ['a', '']);
    const own = await (raw.evalsha as (...a: unknown[]) => Promise<unknown>)(sha, 2, 'k:{1}', 'k:{1}:x', 'a', '');
    expect(direct).toEqual(own);
    expect(direct).toEqual(['k:{1}', 'k:{1}:x', 'a', '', 2, 2]);
    await expect(send!('eval', 'return {KEYS[1], #KEYS, #ARGV}', ['one'], [])).resolves.toEqual(['one', 1, 0]);
    // A Redis error reaches the caller as the client's own reply error.
    await expect(send!('evalsha', 'f'.repeat(40), [], [])).rejects.toThrow(/NOSCRIPT/);
  });
});

it('keeps an instrumented client\'s own sendCommand (an own property) in place, and sends through it', async () => {
  const client = new Redis6(server.port, '127.0.0.1');
  opened.push(client);
  await client.ping(); // connected: the handshake's commands are behind it
  const original = client.sendCommand.bind(client);
  let seen = 0;
  const instrumented = (command: Parameters<typeof client.sendCommand>[0]) => {
    seen++;
    return original(command);
  };
  (client as unknown as Record<string, unknown>)['sendCommand'] = instrumented;
  const send = scriptSender(client as unknown as Parameters<typeof scriptSender>[0]);
  expect((client as unknown as Record<string, unknown>)['sendCommand']).toBe(instrumented);
  expect(seen).toBe(0);
  await expect(send!('eval', 'return 7', [], [])).resolves.toBe(7);
  expect(seen).toBe(1);
});

describe('clients whose options change how a command is built get their own evalsha', () => {
  it('a keyPrefix: the lock keys carry it, and the lock works', async () => {
    const client = new Redis6(server.port, '127.0.0.1', { keyPrefix: 'app1:' });
    opened.push(client);
    const raw = rawClient(server);
    opened.push(raw);
    const prefix = uniquePrefix();
    const locks = createLocks({ redis: client, prefix });
    const lease = await locks.acquire('order-1', { ttl: 5000 });
    expect(await raw.exists(`app1:${prefix}{order-1}`)).toBe(1);
    expect(await raw.exists(`${prefix}{order-1}`)).toBe(0);
    expect(await locks.tryAcquire('order-1')).toBeNull();
    await lease.release();
    expect(await raw.exists(`app1:${prefix}{order-1}`)).toBe(0);
    await locks.close();
  });

  it.each([{ enableAutoPipelining: true }, { showFriendlyErrorStack: true }])('%o: the lock works', async (options) => {
    const client = new Redis6(server.port, '127.0.0.1', options);
    opened.push(client);
    const locks = createLocks({ redis: client, prefix: uniquePrefix() });
    const lease = await locks.acquire('order-2', { ttl: 5000 });
    expect(await locks.tryAcquire('order-2')).toBeNull();
    await lease.release();
    const again = await locks.tryAcquire('order-2');
    expect(again).not.toBeNull();
    await again!.release();
    await locks.close();
  });
});
