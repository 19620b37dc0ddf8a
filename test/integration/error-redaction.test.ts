/**
 * Errors carry no secrets: ioredis names the command an error answers, with its arguments
 * (`error.command.args`), and latchkey's scripts take the lease's token as an argument, AUTH the
 * password. An error logged whole (util.inspect, JSON.stringify) must show neither.
 */
import { inspect } from 'node:util';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { createLocks, LockError, WrongTypeError } from '../../src/index.js';
import { redactCommandArgs } from '../../src/redact.js';
import { RedisServer } from '../helpers/redis-server.js';

/** Everything a logger could write of `error`: inspected to the bottom, and as JSON with its causes. */
function written(error: unknown): string {
  const causes: unknown[] = [];
  for (let e: unknown = error; e instanceof Error; e = e.cause) causes.push({ ...e, message: e.message });
  return inspect(error, { depth: Infinity, showHidden: true }) + JSON.stringify(causes);
}

describe('errors name their command without its arguments', () => {
  it('an error reply to a script (WRONGTYPE) names the script call, and the lease token does not appear', async () => {
    const server = await RedisServer.start();
    const client = new Redis(server.port, '127.0.0.1');
    const locks = createLocks({ redis: client, prefix: 'redact:' });
    try {
      const lease = await locks.acquire('typed', { ttl: 10_000 });
      await client.del('redact:{typed}');
      await client.rpush('redact:{typed}', 'not a lock'); // the extend's GET is refused with WRONGTYPE
      const error: unknown = await lease.extend(10_000).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(WrongTypeError);
      const cause = (error as WrongTypeError).cause as { message: string; command?: { name: string; args: string[] } };
      expect(cause.message).toMatch(/WRONGTYPE/);
      expect(cause.command?.name).toMatch(/^eval/);
      expect(cause.command?.args).toContain('[redacted]');
      expect(written(error)).not.toContain(lease.token);
    } finally {
      await locks.close();
      client.disconnect();
      await server.stop();
    }
  });

  it('a failed AUTH does not show the password', async () => {
    const server = await RedisServer.start({ args: ['--requirepass', 'right-password'] });
    const password = 'wrong-password-7f3a';
    const client = new Redis({ port: server.port, host: '127.0.0.1', password, maxRetriesPerRequest: null, retryStrategy: () => 50 });
    client.on('error', () => {}); // the test's own listener: latchkey reads the last error as the cause
    const locks = createLocks({ redis: client, prefix: 'redact:' });
    try {
      const error: unknown = await locks.acquire('auth', { wait: 300 }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(LockError);
      expect(String((error as Error).message)).toMatch(/WRONGPASS|invalid username-password/i);
      expect(written(error)).not.toContain(password);
    } finally {
      await locks.close();
      client.disconnect();
      await server.stop();
    }
  });

  it('follows causes and aggregated errors, stops at a loop, and leaves errors without arguments alone', () => {
    const inner = Object.assign(new Error('inner'), { command: { name: 'auth', args: ['user', 'pw'] } });
    const listed = Object.assign(new Error('listed'), { command: { name: 'evalsha', args: ['sha', 'token'] } });
    const outer = new AggregateError([listed], 'outer', { cause: inner });
    (inner as { cause?: unknown }).cause = outer; // a loop
    redactCommandArgs(outer);
    expect(inner.command.args).toEqual(['[redacted]', '[redacted]']);
    expect(listed.command.args).toEqual(['[redacted]', '[redacted]']);
    const plain = new Error('plain');
    expect(redactCommandArgs(plain)).toBe(plain);
    expect(redactCommandArgs('a string')).toBe('a string');
  });
});
