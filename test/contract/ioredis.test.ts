import { afterAll, describe } from 'vitest';
import { ioredisHarness } from '../helpers/harness.js';
import { RedisServer } from '../helpers/redis-server.js';
import { giveUpContract } from './give-up-contract.js';
import { lockContract } from './lock-contract.js';

describe('contract: single Redis through ioredis', () => {
  let server: RedisServer | undefined;
  afterAll(async () => server?.stop());
  lockContract(async () => ioredisHarness((server = await RedisServer.start())));
});

describe('give-up contract: single Redis through ioredis', () => {
  let server: RedisServer | undefined;
  afterAll(async () => server?.stop());
  giveUpContract(async () => ioredisHarness((server = await RedisServer.start())), { semaphores: true, stalls: true });
});
