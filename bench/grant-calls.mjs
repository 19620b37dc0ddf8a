// What runs in a waiting process between a grant's 'message' event and the acquire() it resolves:
// every JavaScript function call there, as V8's `--trace` lists them (names only), for latchkey's
// scripts alone (lib/ring.mjs, joinScripts) and for latchkey (two managers), in one process, as in
// bench/grant-path.mjs: two sides take turns on one key, and the last of HANDOFFS hand-offs
// (default 40) is traced. It prints, per row, how many calls ran in that window, how many of them
// were in Node's stream and async-hooks bookkeeping (the socket read the message came in), in
// ioredis's reply decoder, and the rest: the lock library's (and its Promise steps'), in order.
// `--trace` makes everything slow: this counts steps, it does not time them (bench/grant-path.mjs
// and bench/trace-handoff.mjs do). Usage: npm run build && node bench/grant-calls.mjs
//        LATCHKEY_DIST=bench/dist-a/index.js node bench/grant-calls.mjs  (another build)
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { clientsLine, importIoredis } from './lib/clients.mjs';
import { openPair, takeTurns } from './lib/grant-pair.mjs';
import { startRedisServer } from './lib/redis-server.mjs';
import { onSubscriberMessages } from './lib/subscriber-messages.mjs';

const HANDOFFS = Number(process.env.HANDOFFS || 40);

/** Node's own stream and async-context steps, and ioredis's decoder: not the lock library's. */
const NODE_STEPS = /^(Socket\.read|Readable\.read|noop|howMuchToRead|destroyHooksExist|hasHooks|emitAfterScript|emitBeforeScript|popAsyncContext|pushAsyncContext|enabledHooksExist|shift|isEmpty|maybeReadMore_|processTicksAndRejections|runMicrotasks)$/;
const DECODER = /^(_Decoder_|__classPrivateField|subarray|adjustOffset|onPush|dispatch|returnPush|toString|wrappedDebug|handleSubscriberReply|listeners|_listeners|hasEventListener|unwrapListeners|get)/;

if (process.argv[2] === '--child') {
  const kind = process.argv[3];
  const { Redis } = await importIoredis();
  let tracing = false;
  // Named so that --trace shows them: the window's two ends.
  function GRANT_MESSAGE() {}
  function ACQUIRE_RESOLVED() {}
  onSubscriberMessages(Redis, () => {
    if (tracing) GRANT_MESSAGE();
  });
  const server = await startRedisServer();
  const { pair, close } = await openPair(Redis, kind, server.port, 'grant-calls:');
  // ACQUIRE_RESOLVED is called at every turn (the window ends at the first one after the traced
  // message), and directly: no frame of this script's inside the window.
  await takeTurns(pair, HANDOFFS, { before: (k) => (tracing = k === HANDOFFS - 1), resolved: ACQUIRE_RESOLVED });
  tracing = false;
  await close();
  await server.stop();
  process.exit(0);
} else {
  console.log(clientsLine(['ioredis']));
  const here = fileURLToPath(import.meta.url);
  console.log(`| the last of ${HANDOFFS} hand-offs, one process | calls in the window | Node's stream and hooks | ioredis decoder | the lock's own |`);
  console.log('| --- | --: | --: | --: | --: |');
  const own = {};
  for (const kind of ['scripts', 'latchkey']) {
    const out = execFileSync(process.execPath, ['--trace', here, '--child', kind], { maxBuffer: 1 << 30, env: process.env }).toString();
    const lines = out.split('\n');
    const start = lines.findIndex((l) => /GRANT_MESSAGE\+/.test(l));
    const end = lines.findIndex((l, i) => i > start && /ACQUIRE_RESOLVED\+/.test(l));
    if (start < 0 || end < 0) throw new Error(`${kind}: no traced hand-off (its grant came without a message?)`);
    // A call's entry: "<depth>: <tier><name>+<offset>(this=...) {"; the markers themselves are not counted.
    const names = lines
      .slice(start + 1, end)
      .map((l) => /^\s*\d+:\s*[~*^]?([^(]*?)\+\d+\(/.exec(l)?.[1])
      .filter((n) => n !== undefined && !/GRANT_MESSAGE|ACQUIRE_RESOLVED/.test(n))
      .map((n) => n || '(anonymous)');
    const node = names.filter((n) => NODE_STEPS.test(n)).length;
    const decoder = names.filter((n) => DECODER.test(n)).length;
    own[kind] = names.filter((n) => !NODE_STEPS.test(n) && !DECODER.test(n));
    console.log(`| ${kind} | ${names.length} | ${node} | ${decoder} | ${own[kind].length} |`);
  }
  for (const [kind, names] of Object.entries(own)) console.log(`\n${kind}, the lock's own calls in order:\n${names.join(' ')}`);
}
