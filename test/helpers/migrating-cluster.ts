/**
 * What the slot-migration test files share: a cluster started before their tests and stopped after
 * them, an ioredis Cluster client of the test's own (`raw`), the clean-ups of the managers they
 * made, and the migrations they opened (one a failed test left open is aborted, so that the next
 * test finds the cluster stable).
 */
import { GlideClusterClient, Logger as GlideLogger } from '@valkey/valkey-glide';
import { Cluster } from 'ioredis';
import { createCluster } from 'redis';
import { afterAll, beforeAll } from 'vitest';
import { createLocks, type Locks } from '../../src/index.js';
import type { LocksSettings } from './harness.js';
import { startMigration, type SlotMigration } from './cluster-migration.js';
import { RedisCluster } from './redis-cluster.js';

/** The cluster clients the migration tests run on. */
export type ClusterDriver = 'ioredis' | 'node-redis' | 'valkey-glide';

export interface MigratingCluster {
  /** The cluster (inside tests). */
  readonly cluster: RedisCluster;
  /** A client of the test's own, to look at keys. */
  readonly raw: Cluster;
  /** Run in reverse order after the file's tests, before the cluster stops (managers, their clients). */
  readonly cleanup: Array<() => Promise<unknown>>;
  /** A manager on a cluster client of its own through `driver` (closed with its client after the file's tests). */
  manager(driver: ClusterDriver, settings: LocksSettings): Promise<Locks>;
  /** Opens the migration of `key`'s slot (see startMigration), remembered until it ends. */
  migrating(key: string): Promise<SlotMigration>;
  /** Ends a migration: `finish` gives the slot to the target, `abort` leaves it with the source. */
  end(migration: SlotMigration, how: 'finish' | 'abort'): Promise<void>;
  /** Aborts what a failed test left open (the slot would stay open for the next tests). */
  closeLeftOpen(): Promise<void>;
}

export function useMigratingCluster(options: { readonly replicasPerMaster: 0 | 1 }): MigratingCluster {
  let cluster: RedisCluster | undefined;
  let raw: Cluster | undefined;
  const cleanup: Array<() => Promise<unknown>> = [];
  const open = new Set<SlotMigration>();
  beforeAll(async () => {
    cluster = await RedisCluster.start({ masters: 3, replicasPerMaster: options.replicasPerMaster });
    raw = new Cluster(cluster.startupNodes);
    raw.on('error', () => {});
  }, 60_000);
  afterAll(async () => {
    for (const step of cleanup.reverse()) await step().catch(() => {});
    raw?.disconnect();
    await cluster?.stop();
  });
  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('the cluster is started in beforeAll: use it inside tests');
    return value;
  };
  return {
    get cluster() {
      return started(cluster);
    },
    get raw() {
      return started(raw);
    },
    cleanup,
    async manager(driver, settings) {
      const nodes = started(cluster);
      if (driver === 'ioredis') {
        const client = new Cluster(nodes.startupNodes);
        client.on('error', () => {});
        const locks = createLocks({ redis: client, ...settings });
        cleanup.push(async () => {
          await locks.close();
          client.disconnect();
        });
        return locks;
      }
      if (driver === 'valkey-glide') {
        GlideLogger.setLoggerConfig('error');
        const client = await GlideClusterClient.createClient({ addresses: nodes.startupNodes, requestTimeout: 2000 });
        const locks = createLocks({ redis: client, ...settings });
        cleanup.push(async () => {
          await locks.close();
          client.close();
        });
        return locks;
      }
      const client = createCluster({ rootNodes: nodes.rootNodes });
      client.on('error', () => {});
      await client.connect();
      const locks = createLocks({ redis: client, ...settings });
      cleanup.push(async () => {
        await locks.close();
        await client.close();
      });
      return locks;
    },
    async migrating(key) {
      const migration = await startMigration(started(cluster), key);
      open.add(migration);
      return migration;
    },
    async end(migration, how) {
      open.delete(migration);
      await (how === 'finish' ? migration.finish() : migration.abort());
    },
    async closeLeftOpen() {
      for (const migration of open) {
        await migration.abort().catch((error: unknown) => console.error(`could not abort the migration of slot ${migration.slot}:`, error));
      }
      open.clear();
    },
  };
}
