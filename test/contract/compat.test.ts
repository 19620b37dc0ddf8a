import { afterAll, describe } from 'vitest';
import { compatHarness } from '../helpers/harness.js';
import { RedisServer } from '../helpers/redis-server.js';
import { leaseEndContract } from './lease-end-contract.js';
import { giveUpContract } from './give-up-contract.js';
import { lockContract } from './lock-contract.js';

describe('contract: compat mode (timestamp lock keys shared with legacy services) on a single Redis', () => {
  // One server for both suites; each test uses its own key prefix.
  let server: Promise<RedisServer> | undefined;
  const started = (): Promise<RedisServer> => (server ??= RedisServer.start());
  afterAll(async () => (await server)?.stop());
  // Releases only wake waiters (legacy clients neither queue nor listen), and there is nothing to list.
  lockContract(async () => compatHarness(await started()), { handsOff: false, fencedWrites: true, semaphores: false, list: false });
  leaseEndContract(async () => compatHarness(await started()));
});

describe('give-up contract: compat mode on a single Redis', () => {
  let server: RedisServer | undefined;
  afterAll(async () => server?.stop());
  // Wake mode: a release wakes the queue's first live waiter, which must be the real one.
  giveUpContract(async () => compatHarness((server = await RedisServer.start())), { semaphores: false, stalls: true });
});
