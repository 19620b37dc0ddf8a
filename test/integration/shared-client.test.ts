/**
 * Many managers over one borrowed client, as a process with a manager per tenant has: latchkey adds
 * one pair of connection listeners to the client however many managers share it (Node warns past
 * ten listeners of one event), and takes them off when the last manager closes.
 */
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { describe, expect, it } from 'vitest';
import { createLocks } from '../../src/index.js';
import { uniquePrefix, useRedisServer } from '../helpers/harness.js';

const redis = useRedisServer();

interface Listened {
  listenerCount(event: string): number;
}

async function managersOver(client: Listened, redisOption: unknown, count: number): Promise<void> {
  const warnings: Error[] = [];
  const onWarning = (warning: Error): void => {
    if (warning.name === 'MaxListenersExceededWarning') warnings.push(warning);
  };
  process.on('warning', onWarning);
  try {
    const before = client.listenerCount('error');
    const managers = Array.from({ length: count }, () => createLocks({ prefix: uniquePrefix(), redis: redisOption as never }));
    for (const locks of managers) await locks.withLock('job', async () => undefined);
    expect(client.listenerCount('error')).toBe(before + 1);
    expect(client.listenerCount('ready')).toBeLessThanOrEqual(2);
    for (const locks of managers) await locks.close();
    expect(client.listenerCount('error')).toBe(before);
    // A warning is emitted on the next tick.
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(warnings).toEqual([]);
  } finally {
    process.off('warning', onWarning);
  }
}

describe('many managers over one borrowed client', () => {
  it('ioredis: 25 managers add one error listener, removed when the last closes', async () => {
    const client = new Redis(redis.server.port, '127.0.0.1');
    client.on('error', () => {});
    try {
      await managersOver(client, client, 25);
    } finally {
      client.disconnect();
    }
  });

  it('node-redis: 25 managers add one error listener, removed when the last closes', async () => {
    const client = createClient({ url: `redis://127.0.0.1:${redis.server.port}` });
    client.on('error', () => {});
    await client.connect();
    try {
      await managersOver(client, client, 25);
    } finally {
      client.destroy();
    }
  });
});
