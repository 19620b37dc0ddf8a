/**
 * The contract suite on one Redis through one cell of the client × protocol matrix
 * (test/helpers/client-cells.ts): every suite that applies to a single Redis. Each cell is its own
 * test file (test/contract/ioredis*.test.ts, node-redis*.test.ts), so that a failure names the
 * client, its major and the protocol.
 */
import { afterAll, describe } from 'vitest';
import type { ClientCell } from '../helpers/client-cells.js';
import { ioredisHarness, nodeRedisHarness, type BackendHarness } from '../helpers/harness.js';
import { RedisServer } from '../helpers/redis-server.js';
import { giveUpContract } from './give-up-contract.js';
import { leaseEndContract } from './lease-end-contract.js';
import { lockContract } from './lock-contract.js';
import { reentrancyContract } from './reentrancy-contract.js';

export function clientCellContract(cell: ClientCell): void {
  const harness = (server: RedisServer): Promise<BackendHarness> =>
    cell.driver === 'ioredis' ? ioredisHarness(server, cell) : nodeRedisHarness(server, cell);

  describe(`contract: single Redis through ${cell.label}`, () => {
    // One server for every suite; each test uses its own key prefix.
    let server: Promise<RedisServer> | undefined;
    const started = (): Promise<RedisServer> => (server ??= RedisServer.start());
    afterAll(async () => (await server)?.stop());
    lockContract(async () => harness(await started()));
    leaseEndContract(async () => harness(await started()));
    reentrancyContract(async () => harness(await started()));
  });

  describe(`give-up contract: single Redis through ${cell.label}`, () => {
    let server: RedisServer | undefined;
    afterAll(async () => server?.stop());
    giveUpContract(async () => harness((server = await RedisServer.start())), { semaphores: true, stalls: true });
  });
}
