// One clock for every process of a run: process.hrtime.bigint() (CLOCK_MONOTONIC, shared by all
// processes on the machine), as float milliseconds since a base the parent picks and hands to the
// workers in BENCH_BASE, so the numbers stay small enough for a double to keep sub-microsecond
// precision.

const base = process.env.BENCH_BASE ? BigInt(process.env.BENCH_BASE) : process.hrtime.bigint();

/** The base as a string, to hand to child processes. */
export const baseString = base.toString();

/** Milliseconds since the base. */
export function now() {
  return Number(process.hrtime.bigint() - base) / 1e6;
}

/** Busy-waits `ms` milliseconds without yielding to the event loop (simulated CPU work). */
export function spin(ms) {
  const until = process.hrtime.bigint() + BigInt(Math.round(ms * 1e6));
  while (process.hrtime.bigint() < until) {
    // busy work
  }
}

/** Resolves after `ms` milliseconds. */
export function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
