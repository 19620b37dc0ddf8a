/**
 * One process of the compat interop test (test/integration/compat-timestamp.test.ts): either a
 * legacy peer running the seeds' timestamp lock (timestamp-peer.ts) or a latchkey manager in
 * compat mode, taking the same lock key `rounds` times. Inside the lock it increments a shared
 * counter non-atomically (GET, await, SET) and counts itself in and out of an "inside" counter;
 * it records when each hold began and ended on the machine's wall clock (the same clock in every
 * process). The test bundles this file with esbuild and runs it with node.
 *
 * argv[2]: JSON { port, key, counter, inside, role: 'peer' | 'latchkey', rounds, workMs, pauseMs, peerTimeout, ttl }:
 * each round holds the lock for about workMs, then works outside it for a random time below pauseMs.
 * Prints "ready", waits for a line on stdin (so that all processes start together), then prints
 * one JSON line: { role, acquisitions, lost, maxInside, intervals: [start, end][] }.
 */
import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import { createLocks, LeaseLostError } from '../../src/index.js';
import { TimestampPeer } from './timestamp-peer.js';

interface WorkerConfig {
  readonly port: number;
  readonly key: string;
  readonly counter: string;
  readonly inside: string;
  readonly role: 'peer' | 'latchkey';
  readonly rounds: number;
  readonly workMs: number;
  readonly pauseMs: number;
  readonly peerTimeout: number;
  readonly ttl: number;
}

const config = JSON.parse(process.argv[2] ?? '{}') as WorkerConfig;
/**
 * One timeline for every process: CLOCK_MONOTONIC (process.hrtime), which the system shares, in
 * ms. Not performance.timeOrigin + performance.now(): each process fixes its timeOrigin against the
 * wall clock when it starts, and a wall clock being slewed (NTP, a VM) puts the processes' origins
 * a millisecond or two apart: holds that did not overlap looked as if they had (seen in CI).
 */
const sharedClock = (): number => Number(process.hrtime.bigint()) / 1e6;
const redis = new Redis(config.port, '127.0.0.1');
const intervals: Array<[number, number]> = [];
let maxInside = 0;
let lost = 0;

/** The protected work: a read-modify-write that loses updates if two holders overlap. */
async function critical(): Promise<void> {
  const start = sharedClock();
  maxInside = Math.max(maxInside, await redis.incr(config.inside));
  const read = Number((await redis.get(config.counter)) ?? '0');
  await new Promise((r) => setTimeout(r, config.workMs)); // the work inside the lock
  await redis.set(config.counter, String(read + 1));
  await redis.decr(config.inside);
  intervals.push([start, sharedClock()]);
}

const stdin = createInterface({ input: process.stdin });
/** The work between two holds, outside the lock: without it, whoever holds the lock takes it straight back. */
const outside = (): Promise<unknown> => new Promise((r) => setTimeout(r, Math.random() * config.pauseMs));

const go = new Promise<void>((resolve) => stdin.once('line', () => resolve()));
process.stdout.write('ready\n');
await go;
stdin.close();

if (config.role === 'peer') {
  const peer = new TimestampPeer(redis, config.key, { timeout: config.peerTimeout });
  for (let i = 0; i < config.rounds; i++) {
    await peer.lock();
    await critical();
    await peer.unlock();
    await outside();
  }
} else {
  const client = new Redis(config.port, '127.0.0.1');
  const locks = createLocks({ redis: client, compat: 'timestamp' });
  for (let i = 0; i < config.rounds; i++) {
    const lease = await locks.acquire(config.key, { ttl: config.ttl, wait: 60_000 });
    await critical();
    // A legacy peer that lost a GETSET race after this lease took the lock has overwritten its
    // timestamp (and so its ownership): latchkey then leaves the key alone and reports the lease lost.
    await lease.release().catch((error: unknown) => {
      if (!(error instanceof LeaseLostError)) throw error;
      lost++;
    });
    await outside();
  }
  await locks.close();
  client.disconnect();
}
process.stdout.write(`${JSON.stringify({ role: config.role, acquisitions: intervals.length, lost, maxInside, intervals })}\n`);
redis.disconnect();
