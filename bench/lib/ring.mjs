// The ring of bench/ring.mjs and bench/trace-handoff.mjs (the smallest lock that passes between
// processes: process i always hands to i + 1), and the passes both run: worker processes forked
// together, started together, their records collected.
import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { once } from 'node:events';
import { baseString, now, spin } from './clock.mjs';

/** The ring's release: checks the holder's token, writes the next holder's and tells it. */
export const PASS_ON =
  "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end redis.call('SET', KEYS[1], ARGV[2], 'PX', 10000) return redis.call('PUBLISH', ARGV[3], ARGV[2])";

/**
 * Joins the ring as process `i` of `processes` on the ioredis `client`: `turn()` resolves with the
 * token when the lock comes to this process, `pass(token)` hands it to the next one and resolves
 * to true when that was this process's last pass, `start()` (process 0, once every process
 * listens) sets the ring going, `leave()` closes the subscriber.
 *
 * The ring ends once round after `endAt` (ms on lib/clock.mjs's clock): the first holder to pass
 * after it marks the token ("end…"), and each process that passes a marked token leaves. The
 * holder decides, in the ring's order. (Each process used to look at the clock once its pass was
 * answered: a process descheduled between its pass and that reply looked after the next one
 * did, left after it, and the token came round to a process that had left, with the next one
 * still waiting for it: the bench's stall error, seen once, worker 0 left waiting.)
 */
export async function joinRing(client, i, processes, endAt) {
  const sub = client.duplicate();
  client.defineCommand('passOn', { numberOfKeys: 1, lua: PASS_ON });
  await client.ping();
  // Subscribing before the connection's ready check has run makes ioredis send that check (INFO)
  // in subscriber mode, which Redis refuses.
  if (sub.status !== 'ready') await once(sub, 'ready');
  // The token can come round again before this process has asked for its next turn (its pass's
  // reply late, the process descheduled: under a profiler 8 processes share 2 cores): kept, not lost.
  let resolveTurn;
  let early;
  sub.on('message', (_channel, token) => {
    if (resolveTurn === undefined) early = token;
    else resolveTurn(token);
    resolveTurn = undefined;
  });
  await sub.subscribe(`ring:${i}`);
  return {
    turn: () => {
      if (early === undefined) return new Promise((resolve) => (resolveTurn = resolve));
      const token = early;
      early = undefined;
      return Promise.resolve(token);
    },
    pass: (token) => {
      const last = token.startsWith('end') || now() > endAt;
      return client.passOn('ring', token, `${last ? 'end' : ''}${i + 1}`, `ring:${(i + 1) % processes}`).then(() => last);
    },
    start: () => client.set('ring', 'start', 'PX', 10000).then(() => client.publish('ring:0', 'start')),
    leave: () => sub.disconnect(),
  };
}

/** How long after the end of their run workers may take to finish before they count as stalled. */
const STALLED_MS = 30_000;

/**
 * Forks `processes` workers of `script` with `args(i)`, waits until each says it is ready, sends
 * them all 'go', and resolves with each one's final message. A worker that dies (an error in a
 * library) rejects, instead of leaving the run waiting; so do workers still running 30 s after
 * `endAt` (ms on lib/clock.mjs's clock, when given): a lock that stopped passing (a broken copy of
 * a script, a grant lost), killed and reported instead of a run that never ends. `nodeArgs`:
 * flags for the workers' `node`, before those of RING_NODE_ARGS.
 */
export async function runWorkers(script, processes, args, endAt, nodeArgs = []) {
  // RING_NODE_ARGS: flags for the workers' node (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof").
  const execArgv = [...nodeArgs, ...(process.env.RING_NODE_ARGS ? process.env.RING_NODE_ARGS.split(' ') : [])];
  const workers = Array.from({ length: processes }, (_, i) => fork(script, args(i), { env: { ...process.env, BENCH_BASE: baseString }, execArgv }));
  const next = (w) =>
    new Promise((resolve, reject) => {
      w.once('message', resolve);
      w.once('exit', (code) => code !== 0 && reject(new Error(`a worker (${args(0).join(' ')}) exited with code ${code}`)));
    });
  await Promise.all(workers.map(next));
  const done = new Set(); // the workers that sent their final message (a stalled run names the others)
  const finished = workers.map((w, i) => next(w).then((message) => (done.add(i), message)));
  for (const w of workers) w.send('go');
  if (endAt === undefined) return Promise.all(finished);
  let timer;
  const stalled = new Promise((_, reject) => {
    timer = setTimeout(() => {
      for (const w of workers) w.kill();
      const unfinished = workers.map((_, i) => i).filter((i) => !done.has(i));
      reject(new Error(`workers (${args(0).join(' ')}) still running ${STALLED_MS / 1000} s after the end of their run: the lock stopped passing (unfinished: ${unfinished.join(', ')} of 0-${processes - 1})`));
    }, endAt + STALLED_MS - now());
  });
  try {
    return await Promise.race([Promise.all(finished), stalled]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The smallest fair lock that hands over between processes (bench/ring.mjs's `queue` row): one
 * FIFO list of waiters, tokens that are the processes' numbers, no expiry of queue entries, no
 * fence. Acquire: SET NX PX, or join the list (RPUSH). Release: pop the next waiter, give it the
 * lock and tell it (PUBLISH), or free the lock. What a notified first-come-first-served lock does
 * at the least: a process that wants the lock again after releasing it joins the queue, one
 * round trip, where the ring's fixed order needs none.
 */
export const QUEUE_ACQUIRE =
  "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', 10000) then return 1 end redis.call('RPUSH', KEYS[2], ARGV[1]) return 0";
export const QUEUE_RELEASE =
  "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end local next = redis.call('LPOP', KEYS[2]) if next then redis.call('SET', KEYS[1], next, 'PX', 10000) redis.call('PUBLISH', ARGV[2] .. next, next) return 2 end redis.call('DEL', KEYS[1]) return 1";

/**
 * Joins the queue lock as process `i` on the ioredis `client`: `acquire()` resolves once this
 * process holds the lock (at once, or when a release passes it on), `release()` passes it on,
 * `leave()` closes the subscriber.
 */
export async function joinQueue(client, i) {
  client.defineCommand('queueAcquire', { numberOfKeys: 2, lua: QUEUE_ACQUIRE });
  client.defineCommand('queueRelease', { numberOfKeys: 2, lua: QUEUE_RELEASE });
  await client.ping();
  const inbox = await grantInbox(client, `queue:${i}`);
  const me = String(i);
  return {
    acquire: async () => {
      if ((await client.queueAcquire('queue', 'queue:waiting', me)) === 1) return;
      const granted = inbox.next();
      if (granted) await granted;
    },
    release: () => client.queueRelease('queue', 'queue:waiting', me, 'queue:'),
    leave: () => inbox.close(),
  };
}

/**
 * The smallest fair lock with latchkey's guarantees (bench/ring.mjs's `fenced` row): the queue
 * lock above, plus what latchkey promises and the queue lock does not, at the least each can
 * cost. A fence on every acquisition, from the server's clock (TIME, and the counter written and
 * its last value read in one SET ... GET, written again in the rare case the clock did not pass
 * it), so it stays monotonic when the counter is lost; random tokens, checked on release; and a
 * waiter whose process is gone is passed over (PUBLISH says nobody heard the grant), so a dead
 * process never keeps the lock from the living. Each list entry is "<inbox> <token>": what the
 * grant needs, in the one command that pops it. Left out, as not on the hand-off's path: queue
 * entries that expire on their own, a waiter that leaves the queue (an abort), a holder's name.
 * A grant runs 6 commands (latchkey's release.lua 9), a join 2 (latchkey's acquire.lua 8).
 */
// The fence, in both scripts: the server's clock in µs, or the last fence + 1 if the clock did not
// pass it; the counter written and its last value read in one call. Leaves it in `fence`.
const ISSUE_FENCE = `local now = redis.call('TIME')
local fence = tonumber(now[1]) * 1000000 + tonumber(now[2])
local last = tonumber(redis.call('SET', KEYS[2], fence, 'PX', 86410000, 'GET') or '')
if last and last >= fence then fence = last + 1 redis.call('SET', KEYS[2], fence, 'PX', 86410000) end`;
export const FENCED_ACQUIRE = `if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', 10000) then
${ISSUE_FENCE}
return fence
end
redis.call('RPUSH', KEYS[3], ARGV[2] .. ' ' .. ARGV[1])
return 0`;
export const FENCED_RELEASE = `if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
for _ = 1, 100 do
local entry = redis.call('LPOP', KEYS[3])
if not entry then break end
local inbox, token = string.match(entry, '^(%S+) (%S+)$')
${ISSUE_FENCE}
redis.call('SET', KEYS[1], token, 'PX', 10000)
if redis.call('PUBLISH', ARGV[2] .. inbox, string.format('%.0f', fence)) > 0 then return 2 end
end
redis.call('DEL', KEYS[1])
return 1`;

/**
 * Joins the fenced queue lock as process `i` on the ioredis `client`, as joinQueue does: a new
 * random token per acquisition (as latchkey's), its grants heard on "fenced:inbox:p<i>".
 */
export async function joinFencedQueue(client, i) {
  client.defineCommand('fencedAcquire', { numberOfKeys: 3, lua: FENCED_ACQUIRE });
  client.defineCommand('fencedRelease', { numberOfKeys: 3, lua: FENCED_RELEASE });
  await client.ping();
  const keys = ['fenced', 'fenced:fence', 'fenced:queue'];
  const inbox = await grantInbox(client, `fenced:inbox:p${i}`);
  let token;
  return {
    acquire: async () => {
      token = randomBytes(16).toString('hex');
      if ((await client.fencedAcquire(...keys, token, `p${i}`)) !== 0) return;
      const granted = inbox.next();
      if (granted) await granted;
    },
    release: () => client.fencedRelease(...keys, token, 'fenced:inbox:'),
    leave: () => inbox.close(),
  };
}

/**
 * A process's grants on `channel`, heard on a duplicate of the ioredis `client`: `next()` takes
 * the grant that arrived already (a grant may arrive before the reply that queued the process:
 * two connections) and returns undefined, or returns a promise of the next one; `close()`
 * disconnects the subscriber.
 */
async function grantInbox(client, channel) {
  const sub = client.duplicate();
  // Subscribing before the connection's ready check has run makes ioredis send that check (INFO)
  // in subscriber mode, which Redis refuses.
  if (sub.status !== 'ready') await once(sub, 'ready');
  let granted = false;
  let resolveGrant;
  sub.on('message', () => {
    granted = true;
    resolveGrant?.();
  });
  await sub.subscribe(channel);
  const taken = () => {
    granted = false;
    resolveGrant = undefined;
  };
  return {
    next: () => (granted ? taken() : new Promise((resolve) => (resolveGrant = resolve)).then(taken)),
    close: () => sub.disconnect(),
  };
}

/**
 * The smallest client of latchkey's own scripts (bench/ring.mjs's `scripts` row): acquire.lua
 * with the queue's keys (a waiter entry with an expiry, a fence) and release.lua (a grant to the
 * first live waiter, a fence from the server's clock, a message to its inbox), called straight
 * through ioredis: no manager, no in-process queue, no keeper, no timers. What latchkey's
 * guarantees cost on this machine with no library code around them: its hand-off can be no faster.
 * `releaseLua`: the path of another release.lua to call instead (same keys and arguments).
 */
// SCRIPTS_BUSY_US="<grant>,<release>": busy work (µs) the `scripts` row does once a grant has
// arrived, before its acquire resolves, and once its release is answered. A diagnostic: what
// latchkey's own code around the same scripts costs, as plain CPU and nothing else.
const [BUSY_GRANT_MS, BUSY_RELEASE_MS] = (process.env.SCRIPTS_BUSY_US ?? '0,0').split(',').map((us) => Number(us || 0) / 1000);

export async function joinScripts(client, i, releaseLua) {
  const lua = (name) => readFileSync(new URL(`../../src/lua/${name}.lua`, import.meta.url), 'utf8');
  client.defineCommand('lkAcquire', { numberOfKeys: 4, lua: lua('acquire') });
  client.defineCommand('lkRelease', { numberOfKeys: 4, lua: releaseLua ? readFileSync(releaseLua, 'utf8') : lua('release') });
  await client.ping();
  const keys = ['scripts', 'scripts:fence', 'scripts:queue', 'scripts:alive'];
  // A release tells waiter "<inbox>:<id>" on channel "scripts:inbox:<inbox>".
  const member = `p${i}:1`;
  const inbox = await grantInbox(client, `scripts:inbox:p${i}`);
  let token;
  const release = () => client.lkRelease(...keys, token, 'scripts:inbox:');
  return {
    acquire: async () => {
      token = `0000000${i}${randomBytes(16).toString('hex')}`;
      if (typeof (await client.lkAcquire(...keys, token, 10_000, '', member, 30_000)) === 'number') return;
      const granted = inbox.next();
      if (granted) await granted;
      if (BUSY_GRANT_MS > 0) spin(BUSY_GRANT_MS);
    },
    // (The busy work's extra promise only with the diagnostic on: the floor's release is the bare call.)
    release:
      BUSY_RELEASE_MS > 0
        ? () =>
            release().then((reply) => {
              spin(BUSY_RELEASE_MS);
              return reply;
            })
        : release,
    leave: () => inbox.close(),
  };
}
