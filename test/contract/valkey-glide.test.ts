import { afterAll, describe } from 'vitest';
import { glideHarness } from '../helpers/harness.js';
import { RedisServer } from '../helpers/redis-server.js';
import { leaseEndContract } from './lease-end-contract.js';
import { giveUpContract } from './give-up-contract.js';
import { lockContract } from './lock-contract.js';

describe('contract: single Redis through Valkey GLIDE (GlideClient)', () => {
  // One server for both suites; each test uses its own key prefix.
  let server: Promise<RedisServer> | undefined;
  const started = (): Promise<RedisServer> => (server ??= RedisServer.start());
  afterAll(async () => (await server)?.stop());
  lockContract(async () => glideHarness(await started()));
  leaseEndContract(async () => glideHarness(await started()));
});

describe('give-up contract: single Redis through Valkey GLIDE (GlideClient)', () => {
  let server: RedisServer | undefined;
  afterAll(async () => server?.stop());
  giveUpContract(async () => glideHarness((server = await RedisServer.start())), { semaphores: true, stalls: true });
});
