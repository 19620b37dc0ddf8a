/**
 * Type-level test, compiled by `tsc --noEmit` (npm run typecheck), never run: every client a user
 * may pass is accepted where latchkey takes one, whatever its major or its type parameters.
 * ioredis 6's `Redis` and `Cluster` take a reply-mapping type parameter (`'legacy'` or
 * `'resp3'`), carried through `duplicate()`; node-redis's clients carry their RESP version.
 * latchkey's options take `unknown` and recognise the client at run time (src/client/detect.ts),
 * so a narrower option type would break one of these lines. The packed package's declarations
 * get the same check against the registry's latest clients in scripts/pack-smoke.mjs.
 */
import { Cluster, Redis } from 'ioredis';
import { Redis as Redis5 } from 'ioredis5';
import { Valkey } from 'iovalkey';
import { createClient, createCluster } from 'redis';
import { createClient as createClient5 } from 'redis5';
import { checkEvictionPolicy, createLocks, type Locks, type LocksOptions } from '../../src/index.js';

const resp3: Redis<'resp3'> = new Redis({ replyMapping: 'resp3', lazyConnect: true });
const resp3Duplicate: Redis<'resp3'> = resp3.duplicate();
const legacy: Redis = new Redis({ lazyConnect: true });
const resp2: Redis = new Redis({ protocol: 2, lazyConnect: true });
const resp3Cluster: Cluster<'resp3'> = new Cluster([{ port: 7000 }], { lazyConnect: true, redisOptions: { replyMapping: 'resp3' } });
const resp3ClusterDuplicate: Cluster<'resp3'> = resp3Cluster.duplicate();
const ioredis5 = new Redis5({ lazyConnect: true });
const valkey = new Valkey({ lazyConnect: true });
const nodeRedis = createClient();
const nodeRedisResp2 = createClient({ RESP: 2 });
const nodeRedis5 = createClient5();
const nodeRedis5Resp3 = createClient5({ RESP: 3 });
const nodeRedisCluster = createCluster({ rootNodes: [] });

export const options: LocksOptions[] = [
  { redis: resp3 },
  { redis: resp3Duplicate },
  { redis: legacy },
  { redis: resp2 },
  { redis: resp3Cluster },
  { redis: resp3ClusterDuplicate },
  { redis: ioredis5 },
  { redis: valkey },
  { redis: nodeRedis },
  { redis: nodeRedisResp2 },
  { redis: nodeRedis5 },
  { redis: nodeRedis5Resp3 },
  { redis: nodeRedisCluster },
  { redlock: [resp3, legacy, ioredis5] },
  { redlock: [nodeRedis, nodeRedis5Resp3, resp3Duplicate] },
];

export const managers = (): Locks[] => [createLocks({ redis: resp3 }), createLocks({ redlock: [resp3, resp2, ioredis5] })];
export const policy = () => checkEvictionPolicy(resp3);
