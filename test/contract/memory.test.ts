import { describe } from 'vitest';
import { memoryHarness } from '../helpers/harness.js';
import { giveUpContract } from './give-up-contract.js';
import { lockContract } from './lock-contract.js';

describe('contract: in-memory backend', () => {
  lockContract(async () => memoryHarness());
});

describe('give-up contract: in-memory backend', () => {
  giveUpContract(async () => memoryHarness(), { semaphores: true, stalls: false });
});
