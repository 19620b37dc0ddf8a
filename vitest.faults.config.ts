import { defineConfig } from 'vitest/config';

/** `npm run test:faults`: the randomized fault soak (test/faults/*.soak.ts), kept out of `npm test`. */
export default defineConfig({
  test: {
    include: ['test/faults/**/*.soak.ts'],
    globalSetup: ['test/helpers/global-setup.ts'],
    testTimeout: 0,
    hookTimeout: 60_000,
    pool: 'forks',
    reporters: ['verbose'],
  },
});
