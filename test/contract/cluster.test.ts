import { afterAll, describe } from 'vitest';
import { glideClusterHarness, ioredisClusterHarness, nodeRedisClusterHarness } from '../helpers/harness.js';
import { RedisCluster } from '../helpers/redis-cluster.js';
import { leaseEndContract } from './lease-end-contract.js';
import { lockContract } from './lock-contract.js';

// One cluster of three masters for the three clients; each test uses its own key prefix.
let cluster: Promise<RedisCluster> | undefined;
const started = (): Promise<RedisCluster> => (cluster ??= RedisCluster.start({ masters: 3 }));
afterAll(async () => (await cluster)?.stop());

describe('contract: Redis Cluster (3 masters) through ioredis Cluster', () => {
  lockContract(async () => ioredisClusterHarness(await started()));
  leaseEndContract(async () => ioredisClusterHarness(await started()));
});

describe('contract: Redis Cluster (3 masters) through node-redis createCluster', () => {
  lockContract(async () => nodeRedisClusterHarness(await started()));
  leaseEndContract(async () => nodeRedisClusterHarness(await started()));
});

describe('contract: Redis Cluster (3 masters) through Valkey GLIDE GlideClusterClient', () => {
  lockContract(async () => glideClusterHarness(await started()));
  leaseEndContract(async () => glideClusterHarness(await started()));
});
