import { afterAll, describe } from 'vitest';
import { redlockHarness } from '../helpers/harness.js';
import { RedisServer } from '../helpers/redis-server.js';
import { leaseEndContract } from './lease-end-contract.js';
import { giveUpContract } from './give-up-contract.js';
import { lockContract } from './lock-contract.js';

describe('contract: Redlock over three independent servers', () => {
  // Three servers for both suites; each test uses its own key prefix.
  let servers: Promise<RedisServer[]> | undefined;
  const started = (): Promise<RedisServer[]> => (servers ??= Promise.all([RedisServer.start(), RedisServer.start(), RedisServer.start()]));
  afterAll(async () => Promise.all(((await servers) ?? []).map((s) => s.stop())));
  lockContract(async () => redlockHarness(await started()), { handsOff: false, fencedWrites: false, semaphores: false });
  leaseEndContract(async () => redlockHarness(await started()));
});

describe('give-up contract: Redlock over three independent servers', () => {
  const servers: RedisServer[] = [];
  afterAll(async () => Promise.all(servers.map((s) => s.stop())));
  giveUpContract(
    async () => {
      servers.push(...(await Promise.all([RedisServer.start(), RedisServer.start(), RedisServer.start()])));
      return redlockHarness(servers);
    },
    // Wake mode, and every node stalled leaves the vote undecided.
    { semaphores: false, stalls: true, quorum: true },
  );
});
