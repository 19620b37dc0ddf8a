import { afterAll, describe } from 'vitest';
import { glideHarness } from '../helpers/harness.js';
import { RedisServer } from '../helpers/redis-server.js';
import { giveUpContract } from './give-up-contract.js';
import { lockContract } from './lock-contract.js';

describe('contract: single Redis through Valkey GLIDE (GlideClient)', () => {
  let server: RedisServer | undefined;
  afterAll(async () => server?.stop());
  lockContract(async () => glideHarness((server = await RedisServer.start())));
});

describe('give-up contract: single Redis through Valkey GLIDE (GlideClient)', () => {
  let server: RedisServer | undefined;
  afterAll(async () => server?.stop());
  giveUpContract(async () => glideHarness((server = await RedisServer.start())), { semaphores: true, stalls: true });
});
