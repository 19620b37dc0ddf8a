/**
 * What a waiter run (waiter-run.ts) records of each call and of each lease it got, the names of
 * the resources its steps share, how late a call may settle, the reason a planned abort gives, and
 * two small helpers (a delay, an error's description).
 */
import type { Lease } from '../../src/index.js';

/** How late past its wait (or abort, or close) a call may settle: one attempt in flight (250 ms) and a loaded machine. */
export const GRACE_MS = 1000;
/** The semaphore every plan's `permit` steps share. */
export const SEMAPHORE = 'sem';
/** The lock a warm plan's managers wait for before the steps (see {@link Plan.warm}). */
export const WARM = 'warm';

/** The reason a planned abort gives: a rejection must be this very object. */
export class PlannedAbort extends Error {
  constructor(label: string) {
    super(`planned abort of ${label}`);
    this.name = 'PlannedAbort';
  }
}

export interface Call {
  readonly label: string;
  readonly m: number;
  /** The lock's name, or SEMAPHORE. */
  readonly resource: string;
  /** How many leases of the resource may be live at once. */
  readonly limit: number;
  readonly once: boolean;
  readonly wait: number;
  readonly started: number;
  /** Made after its manager was closed. */
  readonly afterClose: boolean;
  reason?: PlannedAbort;
  abortedAt?: number;
  settledAt?: number;
}

export interface Held {
  readonly call: Call;
  readonly lease: Lease;
  /** The test released it (or closed its manager, which releases it). */
  released: boolean;
}

export const delay = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export function describeError(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
