/**
 * examples/postgres-fenced-worker.mjs against a private redis-server and the local PostgreSQL
 * (127.0.0.1:5432, database `test`, user postgres; DATABASE_URL overrides). A holder whose lease
 * expired writes late and PostgreSQL refuses it; the newer holder's writes, with an equal fence
 * twice, are accepted. The test creates its own table under a random name and drops it.
 * PostgreSQL is required: when it cannot be reached the test fails, it does not skip.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisServer } from '../helpers/redis-server.js';
import { startExample } from './run-example.js';

const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const table = `latchkey_example_${randomBytes(4).toString('hex')}`;
let server: RedisServer;
let db: pg.Client;

beforeAll(async () => {
  db = new pg.Client({ connectionString: DATABASE_URL, connectionTimeoutMillis: 3_000 });
  try {
    await db.connect();
  } catch (error) {
    throw new Error(
      `PostgreSQL is not reachable at ${DATABASE_URL.replace(/:[^:@/]*@/, ':***@')} (${String(error)}). ` +
        'The examples tests need a running PostgreSQL (trust auth on 127.0.0.1:5432 with database "test", or set DATABASE_URL); they do not skip.',
      { cause: error },
    );
  }
  server = await RedisServer.start();
});

afterAll(async () => {
  if (db) {
    await db.query(`DROP TABLE IF EXISTS ${pg.escapeIdentifier(table)}`).catch(() => undefined);
    await db.end().catch(() => undefined);
  }
  await server?.stop();
});

interface Summary {
  a: { fence: number; write: boolean; release: string };
  b: { fence: number; writes: boolean[] };
  row: { value: string; fence: number };
}

const run = async (id: number): Promise<Summary> => {
  const example = startExample('postgres-fenced-worker.mjs', ['--table', table, '--id', String(id), '--json'], {
    REDIS_URL: server.url,
    DATABASE_URL,
  });
  const code = await example.exited();
  expect(example.stderr()).toBe('');
  expect(code).toBe(0);
  return JSON.parse(example.stdout().trim()) as Summary;
};

describe('examples/postgres-fenced-worker.mjs', () => {
  it('refuses the late write of a holder whose lease expired, and keeps the newer holder\'s', async () => {
    const summary = await run(1);
    expect(summary.b.fence).toBeGreaterThan(summary.a.fence);
    expect(summary.b.writes).toEqual([true, true]); // an equal fence is accepted: one holder, two writes
    expect(summary.a.write).toBe(false);
    expect(summary.a.release).toMatch(/^LeaseLostError \((expired|taken)\)$/);

    // What PostgreSQL holds, read by the test itself.
    const { rows } = await db.query<{ value: string; fence: string }>(`SELECT value, fence FROM ${pg.escapeIdentifier(table)} WHERE id = 1`);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.value).toBe(`written by B, step 2 (fence ${summary.b.fence})`);
    expect(Number(rows[0]!.fence)).toBe(summary.b.fence);
  });

  it('keeps refusing on a second run over the same row: fences keep growing across runs', async () => {
    const before = Number((await db.query<{ fence: string }>(`SELECT fence FROM ${pg.escapeIdentifier(table)} WHERE id = 1`)).rows[0]!.fence);
    const summary = await run(1);
    expect(summary.a.fence).toBeGreaterThan(before);
    expect(summary.a.write).toBe(false);
    expect(summary.row.fence).toBe(summary.b.fence);
  });

  it('a stale write that comes before the newer holder writes is overwritten by it (fences order writes)', async () => {
    // The same SQL as the example, by hand: fence 200 writes, then fence 100 (stale) is refused,
    // then fence 200 again (the same holder) is accepted.
    const t = pg.escapeIdentifier(table);
    const write = async (value: string, fence: number): Promise<number | null> =>
      (
        await db.query(
          `INSERT INTO ${t} AS t (id, value, fence) VALUES ($1, $2, $3)
           ON CONFLICT (id) DO UPDATE SET value = EXCLUDED.value, fence = EXCLUDED.fence WHERE t.fence <= EXCLUDED.fence`,
          [2, value, fence],
        )
      ).rowCount;
    expect(await write('stale holder, first', 100)).toBe(1); // nobody newer has written yet: it lands
    expect(await write('new holder', 200)).toBe(1); // the newer holder follows and overwrites it
    expect(await write('stale holder, late', 100)).toBe(0); // from now on the stale one is refused
    expect(await write('new holder again', 200)).toBe(1); // equal fence: the holder's own second write
  });
});
