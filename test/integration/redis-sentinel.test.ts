/**
 * Sentinel, through the client's own Sentinel support: a primary, two replicas and one sentinel.
 * The primary dies; Sentinel promotes a replica and moves the other one to it; a lease acquired
 * with replica acknowledgement is still held on the new primary, and the watchdog renews it there
 * (renewals are acknowledged too, so the new primary needs a replica of its own).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocks, type Locks } from '../../src/index.js';
import { rawClient, uniquePrefix, managerOver } from '../helpers/harness.js';
import { freePort, RedisServer } from '../helpers/redis-server.js';

let primary: RedisServer;
let replica: RedisServer;
let second: RedisServer;
let sentinel: ChildProcess;
let sentinelPort: number;
const dir = mkdtempSync(join(tmpdir(), 'latchkey-sentinel-'));
const cleanup: Array<() => Promise<unknown>> = [];

/** Polls until `check` holds: replication and Sentinel's view change with no event a client can wait for. */
async function until(check: () => Promise<boolean>, what: string, ms = 15_000): Promise<void> {
  const end = performance.now() + ms;
  while (!(await check().catch(() => false))) {
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

beforeAll(async () => {
  primary = await RedisServer.start({ args: ['--repl-diskless-sync-delay', '0'] });
  // Two replicas: after the failover the new primary still has one, to acknowledge renewals.
  const replicaArgs = { args: ['--replicaof', '127.0.0.1', String(primary.port), '--repl-diskless-sync-delay', '0'] };
  [replica, second] = await Promise.all([RedisServer.start(replicaArgs), RedisServer.start(replicaArgs)]);
  for (const server of [replica, second]) {
    const raw = rawClient(server);
    await until(async () => /master_link_status:up/.test(await raw.info('replication')), 'the replicas to sync');
    raw.disconnect();
  }

  sentinelPort = await freePort();
  const config = join(dir, 'sentinel.conf');
  writeFileSync(
    config,
    [
      `port ${sentinelPort}`,
      'bind 127.0.0.1',
      `dir ${dir}`,
      `sentinel monitor main 127.0.0.1 ${primary.port} 1`,
      'sentinel down-after-milliseconds main 300',
      'sentinel failover-timeout main 3000',
      '',
    ].join('\n'),
  );
  sentinel = spawn('redis-server', [config, '--sentinel'], { stdio: ['ignore', 'pipe', 'pipe'] });
  // Ready once it monitors the primary and has found both replicas.
  const lines = createInterface({ input: sentinel.stdout! });
  await new Promise<void>((resolve, reject) => {
    sentinel.once('exit', (code) => reject(new Error(`sentinel exited with ${code}`)));
    let found = 0;
    lines.on('line', (line) => {
      if (line.includes('+slave ') && ++found === 2) resolve();
    });
  });
  sentinel.stdout!.resume();
});

afterAll(async () => {
  for (const step of cleanup.reverse()) await step().catch(() => {});
  sentinel?.kill('SIGKILL');
  await Promise.all([primary?.stop(), replica?.stop(), second?.stop()]);
  rmSync(dir, { recursive: true, force: true });
});

function viaSentinel(settings: Parameters<typeof createLocks>[0]): Locks {
  const client = new Redis({ sentinels: [{ host: '127.0.0.1', port: sentinelPort }], name: 'main', maxRetriesPerRequest: 20 });
  return managerOver(cleanup, [client], { ...settings, redis: client });
}

describe('Sentinel', () => {
  it('a lease acknowledged by a replica survives the failover, and its watchdog renews it on the new primary once its replica acknowledges', async () => {
    const prefix = uniquePrefix();
    const locks = viaSentinel({ prefix, replication: { replicas: 1, timeout: 2000 } });
    const lease = await locks.acquire('deploy', { ttl: 10_000, renew: { every: 500 } });
    expect(lease.replicated).toBe(true);

    await primary.kill();
    const ask = new Redis(sentinelPort, '127.0.0.1');
    cleanup.push(async () => ask.disconnect());
    await until(
      async () => [replica.port, second.port].includes(Number(((await ask.call('SENTINEL', 'get-master-addr-by-name', 'main')) as string[])[1])),
      'Sentinel to promote a replica',
    );

    // The watchdog's renewals reach the new primary through the client's own Sentinel support,
    // and lengthen the lease once the other replica, which Sentinel moves to the new primary,
    // acknowledges them.
    const before = lease.validUntil;
    await until(async () => lease.validUntil > before + 400, 'a renewal on the new primary');
    expect(lease.held).toBe(true);
    // Nobody else gets the lock on the new primary.
    const other = viaSentinel({ prefix });
    expect(await other.tryAcquire('deploy')).toBeNull();
    await lease.release();
    const next = await other.tryAcquire('deploy');
    expect(next).not.toBeNull();
    expect(next!.fence).toBeGreaterThan(lease.fence);
    await next!.release();
  });
});
