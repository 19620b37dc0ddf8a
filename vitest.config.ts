import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/helpers/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // Most tests wait on Redis, timers and child processes, not on the CPU: two forks on this
    // 2-core machine kind instead of vitest's default one (one per core but one). Three took the
    // run to about 200 s but made the timing-sensitive fault and Cluster tests flaky.
    maxWorkers: 2,
    minWorkers: 1,
    dangerouslyIgnoreUnhandledErrors: false,
  },
});
