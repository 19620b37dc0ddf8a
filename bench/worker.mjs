// A worker process of the benchmark, forked by run.mjs. It gets a `setup` message, creates the
// adapter(s), says `ready`, runs its role on `go` and reports its raw timestamps (ms on the clock
// shared by all processes, see lib/clock.mjs) back over IPC. The parent computes every figure.
import { importIoredis } from './lib/clients.mjs';
import { now, sleep, spin } from './lib/clock.mjs';

let setup;
let inst;
let stopping = false; // no new acquisitions
let hardStop = false; // give up waits in progress too
const errors = new Map();
const pending = new Set(); // wantAt of waits in progress, to report waits that never ended

const send = (msg) => new Promise((resolve) => process.send(msg, () => resolve()));

function noteError(error) {
  let text = String(error?.message ?? error).replace(/\s+/g, ' ');
  if (setup?.key) text = text.replaceAll(setup.key, '<key>');
  text = text.slice(0, 160);
  const name = error?.name && error.name !== 'Error' ? `${error.name}: ` : '';
  const k = name + text;
  errors.set(k, (errors.get(k) ?? 0) + 1);
}

/**
 * Waits until the lock is ours. A failed acquire() (the library gave up: timeout, retries
 * exhausted) is counted and acquire() is called again at once, as an application that must get
 * the lock would do; the wait figures span from the first call to success.
 */
async function want(key) {
  const wantAt = now();
  const entry = { wantAt };
  pending.add(entry);
  let failures = 0;
  try {
    for (;;) {
      const callAt = now();
      try {
        const handle = await inst.acquire(key);
        return { handle, wantAt, acquiredAt: now(), failures };
      } catch (error) {
        failures++;
        noteError(error);
        if (hardStop) return null;
        if (now() - callAt < 1) await sleep(1); // an instant failure (connection error): don't spin
      }
    }
  } finally {
    pending.delete(entry);
  }
}

/** What every result message carries besides its records. */
const common = () => ({ at: now(), pending: [...pending].map((e) => e.wantAt), errors: errorList() });

async function release(handle) {
  try {
    await inst.release(handle);
  } catch (error) {
    noteError(error);
  }
}

const errorList = () => [...errors].map(([message, count]) => ({ message, count }));

/** Scenario 1: one looping contender per process, 1 ms of busy work while holding. */
async function handoff(go) {
  const records = []; // [wantAt, acquiredAt, releaseCalledAt, releaseDoneAt, failures]
  const loop = (async () => {
    while (!stopping) {
      const got = await want();
      if (!got) break;
      spin(setup.holdMs);
      const releaseAt = now();
      await release(got.handle);
      records.push([got.wantAt, got.acquiredAt, releaseAt, now(), got.failures]);
    }
  })();
  await sleep(Math.max(0, go.endAt - now()));
  stopping = true;
  await send({ type: 'result', records: records.slice(), ...common() });
  return loop;
}

/** Scenario 2: 64 tasks in this process on one key, an awaited GET inside the critical section. */
async function inProcess(go) {
  const { Redis } = await importIoredis();
  const getClient = new Redis(setup.directUrl, { lazyConnect: true });
  await getClient.connect();
  const records = []; // [task, wantAt, acquiredAt, releaseCalledAt, releaseDoneAt, failures]
  const task = async (i) => {
    while (!stopping) {
      const got = await want();
      if (!got) break;
      await getClient.get(setup.dataKey);
      const releaseAt = now();
      await release(got.handle);
      records.push([i, got.wantAt, got.acquiredAt, releaseAt, now(), got.failures]);
    }
  };
  const tasks = Promise.all(Array.from({ length: setup.tasks }, (_, i) => task(i)));
  await sleep(Math.max(0, go.endAt - now()));
  stopping = true;
  await send({ type: 'result', records: records.slice(), ...common() });
  return tasks.finally(() => getClient.quit().catch(() => {}));
}

/** Scenario 3, holder: takes the lock with a long TTL, releases it when told. */
async function holder() {
  const got = await want();
  await send({ type: 'held', acquiredAt: got.acquiredAt });
  await new Promise((resolve) => process.once('message', (m) => m.cmd === 'release' && resolve()));
  const releaseAt = now();
  await release(got.handle);
  await send({ type: 'result', releaseAt, releaseDoneAt: now(), ...common() });
}

/** Scenario 3, waiters: `setup.tasks` waits on the held key; each releases as soon as it gets it. */
async function waiters() {
  const records = []; // [wantAt, acquiredAt, releaseCalledAt, releaseDoneAt, failures]
  const tasks = Array.from({ length: setup.tasks }, async () => {
    const got = await want();
    if (!got) return;
    const releaseAt = now();
    await release(got.handle);
    records.push([got.wantAt, got.acquiredAt, releaseAt, now(), got.failures]);
  });
  await send({ type: 'waiting' });
  await Promise.race([Promise.all(tasks), new Promise((resolve) => process.once('message', (m) => m.cmd === 'stop' && resolve()))]);
  hardStop = true;
  await send({ type: 'result', records: records.slice(), done: records.length, ...common() });
}

/** Scenario 4: (a) sequential pairs on a free key, interleaved with PING pairs; (b) 64 loops on 64 keys. */
async function uncontended(go) {
  const pairs = []; // [startedAt, durationMs]
  const pings = [];
  while (now() < go.splitAt) {
    const t0 = now();
    const handle = await inst.acquire();
    await inst.release(handle);
    const t1 = now();
    pairs.push(t0, t1 - t0);
    if (setup.ping) {
      const t2 = now();
      await inst.ping();
      await inst.ping();
      pings.push(t2, now() - t2);
    }
  }
  const done = []; // completion times of pairs in phase (b)
  const loop = async (i) => {
    const key = `${setup.key}:${i}`;
    while (now() < go.endAt) {
      try {
        const handle = await inst.acquire(key);
        await inst.release(handle);
        done.push(now());
      } catch (error) {
        noteError(error);
      }
    }
  };
  await Promise.all(Array.from({ length: setup.tasks }, (_, i) => loop(i)));
  await send({ type: 'result', pairs, pings, done, ...common() });
}

const roles = { handoff, inProcess, holder, waiters, uncontended };

process.on('message', async (msg) => {
  if (msg.cmd === 'setup') {
    setup = msg;
    try {
      const adapter = await import(`./adapters/${setup.adapter}.mjs`);
      inst = await adapter.create({ url: setup.url, key: setup.key, variant: setup.variant, ...(setup.ttl ? { ttl: setup.ttl } : {}) });
      if (setup.role === 'holder') {
        await holder();
        await finish();
      } else {
        await send({ type: 'ready' });
      }
    } catch (error) {
      await send({ type: 'fatal', message: String(error?.stack ?? error) });
      process.exit(1);
    }
  } else if (msg.cmd === 'go') {
    try {
      await roles[setup.role](msg);
    } catch (error) {
      await send({ type: 'fatal', message: String(error?.stack ?? error) });
      process.exit(1);
    }
    await finish();
  } else if (msg.cmd === 'stop') {
    stopping = true;
    hardStop = true;
  }
});

async function finish() {
  stopping = true;
  await Promise.race([inst?.close().catch(() => {}), sleep(3000)]);
  process.exit(0);
}

// The parent going away must not leave a worker behind.
process.on('disconnect', () => process.exit(0));
