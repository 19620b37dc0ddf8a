import { afterAll, describe } from 'vitest';
import { ioredisHarness } from '../helpers/harness.js';
import { RedisServer } from '../helpers/redis-server.js';
import { leaseEndContract } from './lease-end-contract.js';
import { giveUpContract } from './give-up-contract.js';
import { lockContract } from './lock-contract.js';
import { reentrancyContract } from './reentrancy-contract.js';

describe('contract: single Redis through ioredis', () => {
  // One server for every suite; each test uses its own key prefix.
  let server: Promise<RedisServer> | undefined;
  const started = (): Promise<RedisServer> => (server ??= RedisServer.start());
  afterAll(async () => (await server)?.stop());
  lockContract(async () => ioredisHarness(await started()));
  leaseEndContract(async () => ioredisHarness(await started()));
  reentrancyContract(async () => ioredisHarness(await started()));
});

describe('give-up contract: single Redis through ioredis', () => {
  let server: RedisServer | undefined;
  afterAll(async () => server?.stop());
  giveUpContract(async () => ioredisHarness((server = await RedisServer.start())), { semaphores: true, stalls: true });
});
