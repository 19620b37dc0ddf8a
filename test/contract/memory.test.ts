import { describe } from 'vitest';
import { memoryHarness } from '../helpers/harness.js';
import { leaseEndContract } from './lease-end-contract.js';
import { giveUpContract } from './give-up-contract.js';
import { lockContract } from './lock-contract.js';
import { reentrancyContract } from './reentrancy-contract.js';

describe('contract: in-memory backend', () => {
  lockContract(async () => memoryHarness());
  leaseEndContract(async () => memoryHarness());
  reentrancyContract(async () => memoryHarness());
});

describe('give-up contract: in-memory backend', () => {
  giveUpContract(async () => memoryHarness(), { semaphores: true, stalls: false });
});
