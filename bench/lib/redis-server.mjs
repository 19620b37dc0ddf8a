// Starts a private redis-server for the run on a free loopback port (never 6379) without
// persistence, and stops it by its pid.
import { spawn } from 'node:child_process';
import net from 'node:net';
import { sleep } from './clock.mjs';

async function freePort() {
  for (;;) {
    const port = await new Promise((resolve, reject) => {
      const srv = net.createServer();
      srv.once('error', reject);
      srv.listen(0, '127.0.0.1', () => {
        const { port: p } = srv.address();
        srv.close(() => resolve(p));
      });
    });
    if (port !== 6379) return port;
  }
}

function ping(port) {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port });
    let reply = '';
    s.on('connect', () => s.write('PING\r\n'));
    s.on('data', (d) => {
      reply += d.toString();
      if (reply.includes('\r\n')) {
        s.destroy();
        resolve(reply.startsWith('+PONG'));
      }
    });
    s.on('error', () => resolve(false));
  });
}

export async function startRedisServer({ bin = process.env.REDIS_SERVER ?? 'redis-server' } = {}) {
  const port = await freePort();
  const child = spawn(bin, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const spawnError = new Promise((resolve) => child.once('error', resolve));
  for (let i = 0; i < 200; i++) {
    const early = await Promise.race([spawnError, exited, sleep(25).then(() => undefined)]);
    if (early !== undefined) {
      throw new Error(`redis-server did not start (${early instanceof Error ? early.message : `exit ${early}`}): ${stderr.trim()}` +
        ' — install it with `apt-get install redis-server` or set REDIS_SERVER to its path');
    }
    if (await ping(port)) {
      return {
        port,
        pid: child.pid,
        url: `redis://127.0.0.1:${port}`,
        async stop() {
          if (child.exitCode === null && child.signalCode === null) {
            process.kill(child.pid, 'SIGCONT');
            process.kill(child.pid, 'SIGTERM');
            await Promise.race([exited, sleep(3000)]);
            if (child.exitCode === null && child.signalCode === null) process.kill(child.pid, 'SIGKILL');
          }
        },
        /** SIGSTOP: the server hangs; connections stay open and nothing is answered. */
        pause() {
          if (child.exitCode === null && child.signalCode === null) process.kill(child.pid, 'SIGSTOP');
        },
        resume() {
          if (child.exitCode === null && child.signalCode === null) process.kill(child.pid, 'SIGCONT');
        },
        killSync() {
          if (child.exitCode === null && child.signalCode === null) process.kill(child.pid, 'SIGKILL');
        },
      };
    }
  }
  process.kill(child.pid, 'SIGKILL');
  throw new Error(`redis-server on port ${port} did not answer PING within 5 s`);
}
