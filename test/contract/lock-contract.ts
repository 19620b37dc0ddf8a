/**
 * The lock contract: every backend must pass these tests unchanged (memory, Redis via ioredis,
 * Redis via node-redis). Each test uses its own key prefix, so nothing is flushed.
 *
 * lockContract registers its sections in this order; each lives in a file named for what it holds
 * (test/contract/lock-contract-*.ts), and all of them share the context of
 * test/contract/lock-contract-context.ts.
 */
import type { BackendHarness } from '../helpers/harness.js';
import { acquireAndReleaseSection, closeSection, fencingTokensSection, mutualExclusionSection } from './lock-contract-basics.js';
import { lockContractContext, type Capabilities } from './lock-contract-context.js';
import { extendSection, leaseExpirySection } from './lock-contract-expiry.js';
import { inspectSection } from './lock-contract-inspect.js';
import { multiLockSection } from './lock-contract-multi-lock.js';
import { reentrancySection } from './lock-contract-reentrancy.js';
import { semaphoreSection } from './lock-contract-semaphore.js';
import { localQueueSection, waitingSection } from './lock-contract-waiting.js';
import { watchdogSection } from './lock-contract-watchdog.js';
import { timeoutHolderContract } from './timeout-holder-contract.js';

export { aborted, type Capabilities } from './lock-contract-context.js';

const FULL: Capabilities = { handsOff: true, fencedWrites: true, semaphores: true, list: true };

export function lockContract(makeHarness: () => Promise<BackendHarness>, can: Capabilities = FULL): void {
  const ctx = lockContractContext(makeHarness, can);
  const { locks, fresh } = ctx;

  acquireAndReleaseSection(ctx);
  fencingTokensSection(ctx);
  mutualExclusionSection(ctx);
  waitingSection(ctx);
  timeoutHolderContract({ locks, fresh });
  leaseExpirySection(ctx);
  extendSection(ctx);
  watchdogSection(ctx);
  localQueueSection(ctx);
  inspectSection(ctx);
  semaphoreSection(ctx);
  multiLockSection(ctx);
  reentrancySection(ctx);
  closeSection(ctx);
}
