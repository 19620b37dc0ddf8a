/**
 * A Redis that is down (test/helpers/redis-down-suite.ts) through each ioredis-family client of the
 * matrix at its defaults (test/helpers/client-cells.ts), plus iovalkey.
 */
import { Valkey } from 'iovalkey';
import { describe } from 'vitest';
import { IOREDIS_5, IOREDIS_6, IOREDIS_6_RESP2, IOREDIS_6_RESP3_MAPPING, type IoredisCell, type IoredisFamilyClient } from '../helpers/client-cells.js';
import { redisDownSuite, type DownClient } from '../helpers/redis-down-suite.js';

function ioredisFamily(label: string, make: (port: number) => IoredisFamilyClient): DownClient {
  return {
    label,
    reportsRefusal: true,
    make: async (port) => {
      const client = make(port);
      client.on('error', () => {}); // as a user does: ioredis prints unhandled errors otherwise
      return { options: { redis: client }, drop: async () => client.disconnect() };
    },
  };
}

const cell = (c: IoredisCell): DownClient => ioredisFamily(c.label, (port) => c.make(port));

describe('a Redis that is down, through ioredis', () => {
  for (const c of [IOREDIS_6, IOREDIS_6_RESP3_MAPPING, IOREDIS_6_RESP2, IOREDIS_5]) redisDownSuite(cell(c));
  redisDownSuite(ioredisFamily('iovalkey', (port) => new Valkey(port, '127.0.0.1')));
});
