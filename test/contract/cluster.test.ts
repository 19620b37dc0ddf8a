import { afterAll, describe } from 'vitest';
import { glideClusterHarness, ioredisClusterHarness, nodeRedisClusterHarness } from '../helpers/harness.js';
import { RedisCluster } from '../helpers/redis-cluster.js';
import { leaseEndContract } from './lease-end-contract.js';
import { giveUpContract, type GiveUpCapabilities } from './give-up-contract.js';
import { lockContract } from './lock-contract.js';

// One cluster of three masters for the three clients; each test uses its own key prefix.
let cluster: Promise<RedisCluster> | undefined;
const started = (): Promise<RedisCluster> => (cluster ??= RedisCluster.start({ masters: 3 }));
afterAll(async () => (await cluster)?.stop());

/**
 * On Cluster a manager's inbox listens for a lock only while one of its waiters is queued for it,
 * so a first attempt queues only behind another waiter of the same manager; no stalls (a pause on
 * every master) here: the give-up paths under a slow server are covered on one Redis.
 */
const GIVE_UP: GiveUpCapabilities = { semaphores: true, stalls: false };

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

describe('give-up contract: Redis Cluster (3 masters) through ioredis Cluster', () => {
  giveUpContract(async () => ioredisClusterHarness(await started()), GIVE_UP);
});

describe('give-up contract: Redis Cluster (3 masters) through node-redis createCluster', () => {
  giveUpContract(async () => nodeRedisClusterHarness(await started()), GIVE_UP);
});

describe('give-up contract: Redis Cluster (3 masters) through Valkey GLIDE GlideClusterClient', () => {
  giveUpContract(async () => glideClusterHarness(await started()), GIVE_UP);
});
