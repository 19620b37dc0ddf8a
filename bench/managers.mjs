// Many managers on one Redis, idle: MANAGERS (default 200) managers, each with its own ioredis
// client, in PROCESSES (default 4) processes, on one private redis-server. Each manager takes one
// lease, then waits once for a lock another manager holds (so that its inbox, the subscriber
// connection, is open, as in any process that ever waited), then everything is released and the
// managers sit idle for IDLE_SECONDS (default 30). Prints: connections per manager (CLIENT LIST),
// Redis memory per manager (INFO memory used_memory, minus the reading before any manager
// connected) and the connections' own memory (CLIENT LIST tot-mem), Node heap per manager
// (heapUsed after gc, client included), and what the idle managers send: Redis commands per
// second (INFO commandstats, the harness's own left out) and the commands their clients sent
// (counted in each process's ioredis).
// Usage: npm run build && node bench/managers.mjs   (LATCHKEY_DIST, BENCH_CLIENTS as elsewhere)
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { clientsLine, importIoredis } from './lib/clients.mjs';
import { sleep } from './lib/clock.mjs';
import { countCommands } from './lib/count-commands.mjs';
import { latchkeyModule } from './lib/latchkey-module.mjs';
import { clientList, serverLoad, serverReading, subscribers } from './lib/redis-info.mjs';
import { startRedisServer } from './lib/redis-server.mjs';

const here = fileURLToPath(import.meta.url);
const MANAGERS = Number(process.env.MANAGERS || 200);
const PROCESSES = Number(process.env.PROCESSES || 4);
const IDLE_SECONDS = Number(process.env.IDLE_SECONDS || 30);
const log = (...args) => process.stderr.write(`${args.join(' ')}\n`);
const next = (type) => new Promise((resolve) => process.on('message', function on(m) {
  if (m.type === type) {
    process.off('message', on);
    resolve(m);
  }
}));
const gcHeap = () => {
  globalThis.gc();
  globalThis.gc();
  return process.memoryUsage().heapUsed;
};

async function worker({ port, count, index }) {
  const commands = await countCommands();
  const { Redis } = await importIoredis();
  const { createLocks } = await import(latchkeyModule());
  const baseline = gcHeap();
  const managers = [];
  for (let i = 0; i < count; i++) {
    const client = new Redis(port, '127.0.0.1');
    managers.push({ client, locks: createLocks({ redis: client, prefix: 'mgr:' }) });
  }
  const name = (i) => `p${index}:${i}`;
  // One lease each; then each waits for the next one's lock (its inbox opens), and all release.
  const own = await Promise.all(managers.map(({ locks }, i) => locks.acquire(name(i), { ttl: 10_000 })));
  process.send({ type: 'used', connections: managers.length });
  await next('wait');
  const waits = managers.map(({ locks }, i) => locks.acquire(name((i + 1) % count), { ttl: 10_000, wait: 10_000 }));
  await sleep(200);
  await Promise.all(own.map((l) => l.release()));
  await Promise.all((await Promise.all(waits)).map((l) => l.release()));
  await sleep(100);
  const heapPerManager = (gcHeap() - baseline) / count;
  process.on('message', (m) => m.type === 'count' && process.send({ type: 'count', sent: commands.count() }));
  process.send({ type: 'idle', heapPerManager, sent: commands.count() });
  await next('close');
  await Promise.all(managers.map(({ locks }) => locks.close()));
  for (const { client } of managers) client.disconnect();
  process.disconnect();
}

async function main() {
  console.log(clientsLine(['ioredis']));
  const { Redis } = await importIoredis();
  const server = await startRedisServer();
  const harness = new Redis(server.port, '127.0.0.1');
  try {
    const empty = await serverReading(harness, server.pid);
    const share = Math.ceil(MANAGERS / PROCESSES);
    const children = [];
    for (let from = 0, index = 0; from < MANAGERS; from += share, index++) {
      const child = fork(here, ['--worker'], { stdio: ['ignore', 2, 2, 'ipc'], execArgv: ['--expose-gc'] });
      const inbox = [];
      const waiting = new Map();
      child.on('message', (m) => (waiting.has(m.type) ? waiting.get(m.type)(m) : inbox.push(m)));
      const nextOf = (type) => {
        const i = inbox.findIndex((m) => m.type === type);
        if (i >= 0) return Promise.resolve(inbox.splice(i, 1)[0]);
        return new Promise((resolve) => waiting.set(type, (m) => (waiting.delete(type), resolve(m))));
      };
      child.send({ type: 'setup', port: server.port, count: Math.min(share, MANAGERS - from), index });
      children.push({ child, next: nextOf });
    }
    await Promise.all(children.map((c) => c.next('used')));
    const usedClients = (await clientList(harness)).length - 1; // the harness's own connection left out
    log(`${MANAGERS} managers used once (no wait yet): ${usedClients} connections`);
    for (const c of children) c.child.send({ type: 'wait' });
    const idle = await Promise.all(children.map((c) => c.next('idle')));
    await sleep(500);
    const before = await serverReading(harness, server.pid);
    log(`idle for ${IDLE_SECONDS} s`);
    for (const c of children) c.child.send({ type: 'count' });
    const c0 = await Promise.all(children.map((c) => c.next('count')));
    await sleep(IDLE_SECONDS * 1000);
    for (const c of children) c.child.send({ type: 'count' });
    const c1 = await Promise.all(children.map((c) => c.next('count')));
    const after = await serverReading(harness, server.pid);
    const clients = await clientList(harness); // at the end of the idle time: Redis shrinks idle clients' buffers after a few seconds
    const load = serverLoad(before, after);
    const keys = await harness.dbsize();
    const conns = clients.length - 1; // the harness's own connection left out
    const subs = subscribers(clients);
    const totMem = clients.reduce((a, c) => a + (c['tot-mem'] ?? 0), 0);
    const sent = c1.reduce((a, c) => a + c.sent, 0) - c0.reduce((a, c) => a + c.sent, 0);
    const heap = idle.reduce((a, r) => a + r.heapPerManager, 0) / idle.length;
    const kb = (b) => `${(b / 1024).toFixed(1)} KB`;
    console.log(`\n### ${MANAGERS} managers in ${PROCESSES} processes, idle ${IDLE_SECONDS} s\n`);
    console.log('| managers | connections (before any wait) | connections (after a wait) | of which subscribers | Redis used_memory / manager | connections\' tot-mem / manager | keys left / manager | Node heap / manager | Redis cmd/s idle | commands sent/s idle |');
    console.log('| --: | --: | --: | --: | --: | --: | --: | --: | --: | --: |');
    console.log(
      `| ${MANAGERS} | ${usedClients} | ${conns} | ${subs.length} | ${kb((after.usedMemory - empty.usedMemory) / MANAGERS)} | ${kb(totMem / MANAGERS)} | ${(keys / MANAGERS).toFixed(2)} | ${kb(heap)} | ${load.commandsPerSecond.toFixed(2)} | ${(sent / load.seconds).toFixed(2)} |`,
    );
    if (Object.keys(load.calls).length) console.log(`\ncommands Redis ran while idle: ${JSON.stringify(load.calls)}`);
    for (const c of children) c.child.send({ type: 'close' });
    await Promise.all(children.map((c) => new Promise((resolve) => c.child.once('exit', resolve))));
  } finally {
    harness.disconnect();
    await server.stop();
  }
}

if (process.argv.includes('--worker')) {
  await worker(await next('setup'));
} else {
  await main();
}
