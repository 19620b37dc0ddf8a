/**
 * Type-level test, compiled by `tsc --noEmit` (npm run typecheck), never run: every client a user
 * may pass is accepted where latchkey takes one, whatever its major or its type parameters.
 * ioredis 6's `Redis` and `Cluster` take a reply-mapping type parameter (`'legacy'` or
 * `'resp3'`), carried through `duplicate()`; node-redis's clients carry their RESP version.
 * latchkey's options take a structural type (`RedisClientLike`: the few methods by which
 * src/client/detect.ts recognises each client at run time), so a type that asked for more would
 * break one of these lines; a URL string must not compile as `redis` (it goes in `url`). The packed
 * package's declarations get the same check against the registry's latest clients in
 * scripts/pack-smoke.mjs.
 */
import { Cluster, Redis } from 'ioredis';
import { Redis as Redis5 } from 'ioredis5';
import { Valkey } from 'iovalkey';
import type { GlideClient, GlideClusterClient } from '@valkey/valkey-glide';
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
declare const glide: GlideClient;
declare const glideCluster: GlideClusterClient;

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
  { redis: glide },
  { redis: glideCluster },
  { redlock: [resp3, legacy, ioredis5] },
  { redlock: [nodeRedis, nodeRedis5Resp3, resp3Duplicate] },
];

// @ts-expect-error a URL is not a client: it goes in `url`
export const urlAsClient: LocksOptions = { redis: 'redis://localhost:6379' };
// @ts-expect-error nor is an object without a client's methods
export const notAClient: LocksOptions = { redis: { get: () => 1 } };
export const urlsForRedlock: LocksOptions = { redlock: ['redis://a:6379', 'redis://b:6379', legacy] };

export const managers = (): Locks[] => [createLocks({ redis: resp3 }), createLocks({ redlock: [resp3, resp2, ioredis5] })];
export const policy = () => checkEvictionPolicy(resp3);
