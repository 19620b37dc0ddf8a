/**
 * The `latchkey` command against a Redis that stops answering once connected (SIGSTOP): it reports
 * the server as unreachable (exit 69) on latchkey's clock, and Ctrl-C ends a refresh of `watch`
 * that waits for it, rather than waiting for the client, which would wait for ever.
 */
import { describe, expect, it } from 'vitest';
import { spawnCli } from '../helpers/cli-process.js';
import { RedisServer } from '../helpers/redis-server.js';

describe('the latchkey command and a Redis that hangs', () => {
  it('watch: a Redis that stops answering is reported (69) after 5s, and Ctrl-C ends a refresh that waits for it', async () => {
    const hanging = await RedisServer.start();
    try {
      const at = `redis://127.0.0.1:${hanging.port}`;
      const [interrupted, waited] = [spawnCli(['watch', '--interval', '200ms'], { REDIS_URL: at }), spawnCli(['watch', '--interval', '200ms'], { REDIS_URL: at })];
      await Promise.all([interrupted.printed('no locks held'), waited.printed('no locks held')]);
      hanging.pause();
      // A refresh or two later, both wait for a reply that does not come.
      await new Promise((resolve) => setTimeout(resolve, 500));
      const sent = performance.now();
      interrupted.child.kill('SIGINT');
      expect((await interrupted.done).code).toBe(0);
      expect(performance.now() - sent).toBeLessThan(3500); // its close gives up on the hung server within about 2 s
      const gaveUp = await waited.done;
      expect(gaveUp.code).toBe(69);
      expect(gaveUp.stderr).toMatch(/^latchkey: list failed: no reply from Redis .*within \d+ ms/);
    } finally {
      hanging.resume();
      await hanging.stop();
    }
  });
});
