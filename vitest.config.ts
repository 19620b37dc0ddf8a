import { configDefaults, defineConfig } from 'vitest/config';

/** The fault suite (test/faults): its tests land faults inside windows measured by the clock. */
const FAULTS = 'test/faults/**/*.test.ts';

export default defineConfig({
  test: {
    globalSetup: ['test/helpers/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // Most tests wait on timers and on their Redis servers, not on the CPU: four forks on this
    // 2-core machine kind (vitest's default there is one).
    maxWorkers: 4,
    minWorkers: 1,
    dangerouslyIgnoreUnhandledErrors: false,
    projects: [
      {
        extends: true,
        test: {
          name: 'suite',
          include: ['test/**/*.test.ts'],
          exclude: [...configDefaults.exclude, FAULTS],
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: 'faults',
          include: [FAULTS],
          // After the rest, one file at a time: nothing else runs beside a fault's window.
          poolOptions: { forks: { singleFork: true } },
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
