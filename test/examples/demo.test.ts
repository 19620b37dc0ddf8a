/**
 * examples/demo.mjs, the README's quick-start demo, as a user runs it: its worker processes share
 * one lock on a private redis-server (REDIS_URL) and its checks pass; in memory when no Redis is
 * found; a clear exit on an unreachable REDIS_URL and on a bad flag.
 */
import { describe, expect, it } from 'vitest';
import { useRedisServer } from '../helpers/fixtures.js';
import { startExample } from './run-example.js';

const redis = useRedisServer();

/** Settings that keep the demo off the machine's own Redis and from starting a server of its own. */
const ISOLATED = { LATCHKEY_DEMO_SKIP_DEFAULT: '1', LATCHKEY_DEMO_NO_SPAWN: '1' };

describe('examples/demo.mjs', () => {
  it('on Redis: 3 worker processes, 25 acquisitions each; every check passes and its keys are deleted', async () => {
    const demo = startExample('demo.mjs', ['--workers', '3', '--iterations', '25'], { ...ISOLATED, REDIS_URL: redis.server.url });
    expect(await demo.exited(), demo.stdout() + demo.stderr()).toBe(0);
    const out = demo.stdout();
    expect(out).toContain(`backend: Redis at ${redis.server.url} (REDIS_URL), 3 worker processes`);
    expect(out).toMatch(/ok +75 acquisitions in all \(25 \+ 25 \+ 25\)/);
    expect(out).toMatch(/ok +counter 75 == 75 acquisitions/);
    expect(out).toMatch(/ok +75 fences strictly increasing/);
    expect(out).toMatch(/^PASS$/m);
    expect(out).not.toMatch(/FAIL/);
    expect(await redis.raw.dbsize()).toBe(0);
  });

  it('without a Redis: the workers run as tasks on the in-memory backend, and the checks pass', async () => {
    const demo = startExample('demo.mjs', ['--workers', '2', '--iterations', '20'], ISOLATED);
    expect(await demo.exited(), demo.stdout() + demo.stderr()).toBe(0);
    expect(demo.stdout()).toContain('backend: in memory');
    expect(demo.stdout()).toMatch(/^PASS$/m);
  });

  it('an unreachable REDIS_URL: exit 1, the address named, its password not printed', async () => {
    const demo = startExample('demo.mjs', ['--iterations', '5'], { ...ISOLATED, REDIS_URL: 'redis://:hunter2@127.0.0.1:1' });
    expect(await demo.exited()).toBe(1);
    expect(demo.stderr()).toContain('REDIS_URL redis://:***@127.0.0.1:1 does not answer');
    expect(demo.stdout() + demo.stderr()).not.toContain('hunter2');
  });

  it('a bad flag: exit 2, saying what was wrong', async () => {
    const demo = startExample('demo.mjs', ['--workers', 'x'], ISOLATED);
    expect(await demo.exited()).toBe(2);
    expect(demo.stderr()).toContain('--workers must be an integer >= 1, got "x"');
  });
});
