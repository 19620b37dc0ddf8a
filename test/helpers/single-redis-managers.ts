/**
 * Managers on one redis-server through ioredis or node-redis, each on a client of its own, for the
 * test/integration/redis-single-*.test.ts files: the test file's clean-up closes them, then their clients.
 */
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { createLocks, type Locks } from '../../src/index.js';

export type Driver = 'ioredis' | 'node-redis';

/** Makes a manager through `driver` on the server at `port`, on a client of its own. */
export type ManagerOn = (driver: Driver, port: number, settings: { prefix: string; recheck?: number; holder?: string }) => Promise<Locks>;

/** `managerOn` for a test file whose clean-up steps (useRedisServer's `cleanup`) close what it makes. */
export function managersClosedBy(cleanup: Array<() => Promise<unknown>>): ManagerOn {
  return async function managerOn(driver, port, settings) {
    if (driver === 'ioredis') {
      const client = new Redis(port, '127.0.0.1');
      const locks = createLocks({ ...settings, redis: client });
      cleanup.push(async () => {
        await locks.close();
        client.disconnect();
      });
      return locks;
    }
    const client = createClient({ url: `redis://127.0.0.1:${port}` });
    client.on('error', () => {});
    await client.connect();
    const locks = createLocks({ ...settings, redis: client });
    cleanup.push(async () => {
      await locks.close();
      client.destroy();
    });
    return locks;
  };
}
