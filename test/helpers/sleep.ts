/** Waiting a fixed time on a real timer (for tests that let renewals or waits run meanwhile). */

/** Resolves after `ms` milliseconds. */
export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
