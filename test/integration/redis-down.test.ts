/**
 * A Redis that is down (test/helpers/redis-down-suite.ts) through `{ url }` (latchkey's own
 * ioredis client) and through Valkey GLIDE at its defaults. GLIDE connects in createClient, which
 * rejects when the server is down: no manager exists then, so only a server that goes away runs.
 */
import { GlideClient, Logger as GlideLogger } from '@valkey/valkey-glide';
import { describe } from 'vitest';
import { redisDownSuite } from '../helpers/redis-down-suite.js';

describe('a Redis that is down, through url and GLIDE', () => {
  redisDownSuite({
    label: 'url (latchkey\'s own client)',
    reportsRefusal: true,
    make: async (port) => ({ options: { url: `redis://127.0.0.1:${port}` }, drop: async () => {} }),
  });
  redisDownSuite({
    label: 'Valkey GLIDE (GlideClient) at its defaults',
    connectsFirst: true,
    requestTimeout: true,
    reportsRefusal: false,
    make: async (port) => {
      GlideLogger.setLoggerConfig('off');
      const client = await GlideClient.createClient({ addresses: [{ host: '127.0.0.1', port }] });
      return { options: { redis: client }, drop: async () => client.close() };
    },
  });
});
