import { afterAll, describe } from 'vitest';
import { nodeRedisHarness } from '../helpers/harness.js';
import { RedisServer } from '../helpers/redis-server.js';
import { leaseEndContract } from './lease-end-contract.js';
import { giveUpContract } from './give-up-contract.js';
import { lockContract } from './lock-contract.js';
import { reentrancyContract } from './reentrancy-contract.js';

describe('contract: single Redis through node-redis', () => {
  // One server for every suite; each test uses its own key prefix.
  let server: Promise<RedisServer> | undefined;
  const started = (): Promise<RedisServer> => (server ??= RedisServer.start());
  afterAll(async () => (await server)?.stop());
  lockContract(async () => nodeRedisHarness(await started()));
  leaseEndContract(async () => nodeRedisHarness(await started()));
  reentrancyContract(async () => nodeRedisHarness(await started()));
});

describe('give-up contract: single Redis through node-redis', () => {
  let server: RedisServer | undefined;
  afterAll(async () => server?.stop());
  giveUpContract(async () => nodeRedisHarness((server = await RedisServer.start())), { semaphores: true, stalls: true });
});
