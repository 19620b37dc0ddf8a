/**
 * A Redis that is down (test/helpers/redis-down-suite.ts) through each node-redis client of the
 * matrix at its defaults (test/helpers/client-cells.ts): the user calls connect() and, for a
 * server that may be down, does not wait for it (it waits for ever at the defaults).
 */
import { describe } from 'vitest';
import { CLIENT_CELLS, type NodeRedisCell } from '../helpers/client-cells.js';
import { redisDownSuite, type DownClient } from '../helpers/redis-down-suite.js';

const cell = (c: NodeRedisCell): DownClient => ({
  label: c.label,
  reportsRefusal: true,
  make: async (port) => {
    const client = c.make(`redis://127.0.0.1:${port}`);
    client.on('error', () => {}); // node-redis requires one
    client.connect().catch(() => {});
    return { options: { redis: client as never }, drop: async () => client.destroy() };
  },
});

describe('a Redis that is down, through node-redis', () => {
  for (const c of CLIENT_CELLS) if (c.driver === 'node-redis') redisDownSuite(cell(c));
});
