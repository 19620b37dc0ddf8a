// The floor under every notified hand-off between processes: how long a message takes from one
// process, through Redis, to wake another that sat idle. Two measurements, ROUNDS times each
// (default 21), IDLE_MS apart (default 300; the waiting process is idle meanwhile), on a private
// redis-server:
//   publish   PUBLISH in this process -> the subscriber's 'message' callback in a child process;
//   latchkey  lease.release() in this process -> the waiter's acquire() resolved in a child process
//             (the release script grants the lock to the waiter and tells its inbox: one hop).
// Times are process.hrtime.bigint() read in both processes (one monotonic clock on one machine).
// Prints p50, min and max of each, in ms. Usage: npm run build && node bench/wakeup.mjs
// BENCH_CLIENTS=6|5: the ioredis major (lib/clients.mjs, 6 by default); LATCHKEY_DIST: another build.
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { clientsLine, importIoredis } from './lib/clients.mjs';
import { latchkeyModule } from './lib/latchkey-module.mjs';
import { startRedisServer } from './lib/redis-server.mjs';

const ROUNDS = Number(process.env.ROUNDS || 21);
const IDLE_MS = Number(process.env.IDLE_MS || 300);
const { Redis } = await importIoredis();
const { createLocks } = await import(latchkeyModule());

if (process.argv[2] === '--child') {
  const port = Number(process.argv[3]);
  const sub = new Redis(port, '127.0.0.1');
  const client = new Redis(port, '127.0.0.1');
  const locks = createLocks({ redis: client, prefix: 'wakeup:' });
  await sub.subscribe('wakeup');
  sub.on('message', () => process.send({ at: String(process.hrtime.bigint()) }));
  process.on('message', async (m) => {
    if (m.cmd === 'wait') {
      const waiting = locks.acquire(m.key, { ttl: 10_000, wait: 60_000 });
      process.send({ waiting: true });
      const lease = await waiting;
      process.send({ at: String(process.hrtime.bigint()) });
      await lease.release();
    } else if (m.cmd === 'exit') {
      await locks.close();
      client.disconnect();
      sub.disconnect();
      process.exit(0);
    }
  });
  process.send({ ready: true });
} else {
  console.log(clientsLine(['ioredis']));
  const server = await startRedisServer();
  const child = fork(fileURLToPath(import.meta.url), ['--child', String(server.port)]);
  const next = () => new Promise((resolve) => child.once('message', resolve));
  const pause = () => new Promise((resolve) => setTimeout(resolve, IDLE_MS));
  const client = new Redis(server.port, '127.0.0.1');
  const locks = createLocks({ redis: client, prefix: 'wakeup:' });
  const publish = [];
  const latchkey = [];
  try {
    await next(); // ready
    for (let i = 0; i < ROUNDS; i++) {
      await pause();
      const got = next();
      const sent = process.hrtime.bigint();
      await client.publish('wakeup', 'x');
      publish.push(Number(BigInt((await got).at) - sent) / 1e6);
    }
    for (let i = 0; i < ROUNDS; i++) {
      const key = `k${i}`;
      const lease = await locks.acquire(key, { ttl: 10_000 });
      child.send({ cmd: 'wait', key });
      await next(); // waiting
      // The waiter queues in Redis once its inbox listens: wait until its entry is there.
      while ((await client.zcard(`wakeup:{${key}}:queue`)) === 0) await new Promise((r) => setTimeout(r, 5));
      await pause();
      const got = next();
      const released = process.hrtime.bigint();
      await lease.release();
      latchkey.push(Number(BigInt((await got).at) - released) / 1e6);
    }
  } finally {
    child.send({ cmd: 'exit' });
    await locks.close();
    client.disconnect();
    await server.stop();
  }
  const summary = (name, xs) => {
    const s = [...xs].sort((a, b) => a - b);
    console.log(`${name.padEnd(40)} p50 ${s[s.length >> 1].toFixed(3)} ms  min ${s[0].toFixed(3)}  max ${s[s.length - 1].toFixed(3)}  (${s.length} rounds, ${IDLE_MS} ms idle before each)`);
  };
  summary('PUBLISH -> subscriber in another process', publish);
  summary("latchkey release -> waiter acquired", latchkey);
  console.log("latchkey rounds in order (ms):", latchkey.map((x) => x.toFixed(2)).join(" "));
}
