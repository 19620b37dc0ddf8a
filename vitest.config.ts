import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/helpers/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // Most tests wait on Redis, timers and child processes, not on the CPU: three forks on this
    // 2-core machine kind take the run from about 560 s to about 200 s (vitest's default is one
    // fork per core but one).
    maxWorkers: 3,
    minWorkers: 1,
    dangerouslyIgnoreUnhandledErrors: false,
  },
});
