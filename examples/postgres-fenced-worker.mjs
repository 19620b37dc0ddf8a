// latchkey example: a worker that writes to PostgreSQL with the fence checked in SQL.
//
// A lock alone cannot stop a holder that pauses (a long GC, a stopped VM, SIGSTOP) past the end of
// its lease and then writes: by then another worker holds the lock. The fence can. Every lease
// carries `lease.fence`, strictly greater than every earlier lease's on that lock, and the table
// keeps the highest fence that wrote each row. The write and the check are one statement:
//
//   INSERT INTO t (id, value, fence) VALUES ($1, $2, $3)
//   ON CONFLICT (id) DO UPDATE SET value = EXCLUDED.value, fence = EXCLUDED.fence
//    WHERE t.fence <= EXCLUDED.fence
//
// A row count of 0 means the row holds a higher fence: this writer's lease ended and someone
// newer has written; the write is refused and the worker must give up, not retry.
//
// Why `<=` and not `<`: one holder may write the same row several times under one lease (progress,
// then the result, or a statement retried after a dropped connection), always with the same fence;
// `<` would refuse its own second write. Accepting an equal fence is safe because no two leases on
// one lock ever share a fence. It relies on one lock name per row: fences of different lock names
// are not ordered against each other. This is the pattern of docs/safety.md, "Checking a fence".
//
// What this script does (two workers in one process, standing in for two machines):
//   1. worker A takes the lock `balances:<id>` (TTL 300 ms, no watchdog) and computes its value;
//   2. A freezes before writing (think: a 2-second GC pause). Its lease expires; worker B, which
//      was waiting, takes the lock with a higher fence, writes twice (same fence: both accepted),
//      and releases;
//   3. A wakes up and writes with its old fence: PostgreSQL refuses it. A's release then reports
//      the lease it lost (LeaseLostError).
//
// Run (build first: npm run build; a Redis on REDIS_URL, default redis://127.0.0.1:6379; PostgreSQL
// from DATABASE_URL, or the PG* environment variables as psql reads them):
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres node examples/postgres-fenced-worker.mjs
// Options: --table <name> (default latchkey_example_balances; created if missing, kept afterwards),
// --id <row id> (default 1), --json (print a summary object instead of prose).
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import pg from 'pg';
// In an application: import { createLocks, LeaseLostError } from 'latchkey';
import { createLocks, LeaseLostError } from '../dist/index.js';

const { values } = parseArgs({
  options: {
    table: { type: 'string', default: 'latchkey_example_balances' },
    id: { type: 'string', default: '1' },
    json: { type: 'boolean', default: false },
  },
});
const table = pg.escapeIdentifier(values.table);
const id = Number(values.id);
const log = (...args) => {
  if (!values.json) console.log(...args);
};

/** The table: the data, and next to it the highest fence that wrote the row. */
async function ensureTable(db) {
  await db.query(`CREATE TABLE IF NOT EXISTS ${table} (
    id    bigint PRIMARY KEY,
    value text   NOT NULL,
    fence bigint NOT NULL DEFAULT 0
  )`);
}

/**
 * Writes `value` to row `id` if `fence` is at least the row's fence (or the row is new).
 * Resolves to true when written, false when refused as stale. Fences are below 2^53, so a JS
 * number is exact; node-postgres sends it as text and PostgreSQL casts it to bigint.
 */
async function fencedWrite(db, rowId, value, fence) {
  const { rowCount } = await db.query(
    `INSERT INTO ${table} AS t (id, value, fence) VALUES ($1, $2, $3)
     ON CONFLICT (id) DO UPDATE SET value = EXCLUDED.value, fence = EXCLUDED.fence
      WHERE t.fence <= EXCLUDED.fence`,
    [rowId, value, fence],
  );
  return rowCount === 1;
}

const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
// Two managers on two connections: worker A and worker B, as if on two machines.
const redisA = new Redis(redisUrl);
const redisB = new Redis(redisUrl);
const locksA = createLocks({ redis: redisA });
const locksB = createLocks({ redis: redisB });
const db = new pg.Pool(process.env.DATABASE_URL ? { connectionString: process.env.DATABASE_URL } : {});
const key = `balances:${id}`;
const summary = {};

try {
  await ensureTable(db);

  // 1. Worker A takes the lock. No watchdog (acquire renews only with renew: true), so the lease
  //    ends after its TTL, as it would for a holder frozen past its renewals.
  const leaseA = await locksA.acquire(key, { ttl: 300 });
  const valueA = `written by A (fence ${leaseA.fence})`;
  log(`A: holds ${key} with fence ${leaseA.fence}; about to write, then freezes`);

  // 2. While A is frozen: B waits for the lock, gets it when A's lease has expired in Redis, and
  //    writes. The await below stands in for A's pause: A does nothing until B is done.
  const workerB = (async () => {
    const leaseB = await locksB.acquire(key, { ttl: 10_000, wait: 5_000 });
    log(`B: got ${key} with fence ${leaseB.fence} (A's lease ${leaseA.held ? 'still valid?!' : 'has ended'})`);
    const first = await fencedWrite(db, id, `written by B, step 1 (fence ${leaseB.fence})`, leaseB.fence);
    const second = await fencedWrite(db, id, `written by B, step 2 (fence ${leaseB.fence})`, leaseB.fence);
    log(`B: two writes with fence ${leaseB.fence}: ${first ? 'accepted' : 'refused'}, ${second ? 'accepted' : 'refused'}`);
    await leaseB.release();
    return { fence: leaseB.fence, writes: [first, second] };
  })();
  summary.b = await workerB;

  // 3. A wakes up and writes as if nothing happened. The fence check refuses it.
  const acceptedA = await fencedWrite(db, id, valueA, leaseA.fence);
  log(`A: late write with fence ${leaseA.fence}: ${acceptedA ? 'ACCEPTED (this should not happen)' : 'refused, the row holds a higher fence'}`);
  summary.a = { fence: leaseA.fence, write: acceptedA };
  try {
    await leaseA.release();
    summary.a.release = 'released';
  } catch (error) {
    if (!(error instanceof LeaseLostError)) throw error;
    summary.a.release = `LeaseLostError (${error.reason})`;
    log(`A: release reports the lost lease: ${error.message}`);
  }

  const { rows } = await db.query(`SELECT value, fence FROM ${table} WHERE id = $1`, [id]);
  // bigint columns come back as strings from node-postgres.
  summary.row = { value: rows[0].value, fence: Number(rows[0].fence) };
  log(`row ${id} of ${values.table}: ${JSON.stringify(summary.row)}`);
  if (values.json) console.log(JSON.stringify(summary));
  if (acceptedA) process.exitCode = 1;
} finally {
  await Promise.all([locksA.close(), locksB.close()]);
  redisA.disconnect();
  redisB.disconnect();
  await db.end();
}
