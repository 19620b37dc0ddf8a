import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisCluster } from '../helpers/redis-cluster.js';

let cluster: RedisCluster;
beforeAll(async () => {
  const t0 = performance.now();
  cluster = await RedisCluster.start({ masters: 3, replicasPerMaster: 1 });
  console.info('start ms', performance.now() - t0, cluster.nodes.map((n) => [n.port, n.pid, n.role, n.id.slice(0, 6)]));
});
afterAll(async () => {
  await cluster?.stop();
});

describe('explore', () => {
  it('lua spublish', async () => {
    const m = await cluster.masterForKey('{x}');
    console.info('master for {x}', m.port, await m.call('EVAL', "return redis.call('SPUBLISH', '{x}:chan', 'hi')", 1, '{x}'));
    try { console.info('cross', await m.call('EVAL', "return redis.call('SPUBLISH', '{y}:chan', 'hi')", 1, '{x}')); } catch (e) { console.info('cross err', (e as Error).message); }
    try { console.info('nokeys', await m.call('EVAL', "return redis.call('SPUBLISH', '{x}:chan', 'hi')", 0)); } catch (e) { console.info('nokeys err', (e as Error).message); }
    const t0 = performance.now();
    const r = await cluster.failover(m);
    console.info('failover ms', performance.now() - t0, r.port, r.role, m.role);
    expect(1).toBe(1);
    void Cluster;
  });
});
