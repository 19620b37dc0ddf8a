// Where the workers of a bench/ring.mjs run spent their CPU, from the V8 CPU profiles it can write:
// self time per function and per origin (latchkey's build, ioredis, Node's own modules, native
// code, the bench's), summed over each row's workers. Samples of the worker idle in its event
// loop, and of the hold's busy work (`spin`, and anything under it), are left out, and so are the
// first SKIP_MS ms of each profile (default 3000: start-up and the warm-up) and its last 300.
// Usage:
//   RING_NODE_ARGS="--cpu-prof --cpu-prof-interval=50 --cpu-prof-dir=/tmp/prof" RING_STEADY=0 \
//     PASSES=1 BENCH_SECONDS=4 RING_WITH=latchkey/default node bench/ring.mjs
//   node bench/cpu-profile-sum.mjs /tmp/prof [top]   (top: functions listed per row, default 20)
// The profiles are grouped by start time, 8 per row (ring.mjs's processes), in the order the rows
// ran: ring, queue, fenced, scripts, then RING_WITH's. Add `--no-opt` to RING_NODE_ARGS to see the code V8
// runs before it optimizes anything (a process's first seconds, taken to the extreme).
import fs from 'node:fs';
import path from 'node:path';
import { frameName, profileTree } from './lib/lock-profile.mjs';

const PROCESSES = 8;
const SKIP_US = 1000 * Number(process.env.SKIP_MS ?? 3000);
const TAIL_US = 300_000;
const [dir, topArg] = process.argv.slice(2);
if (!dir) {
  console.error('usage: node bench/cpu-profile-sum.mjs <directory of .cpuprofile files> [top]');
  process.exit(2);
}
const TOP = Number(topArg ?? 20);

/** Where a frame's code comes from. */
function origin(url, functionName) {
  if (url.includes('/dist/')) return 'latchkey';
  if (url.includes('node_modules/ioredis')) return 'ioredis';
  if (url.includes('/bench/')) return 'bench';
  if (url.startsWith('node:')) return 'node';
  return functionName.startsWith('(') ? functionName : 'native';
}

/** Self time (µs) per function and per origin in one profile, within the window, idle and the hold left out. */
function sum(profile, self, origins) {
  const { nodes: byId, parent } = profileTree(profile);
  const holding = new Map();
  const inHold = (id) => {
    if (!holding.has(id)) {
      const p = parent.get(id);
      holding.set(id, byId.get(id).callFrame.functionName === 'spin' || (p !== undefined && inHold(p)));
    }
    return holding.get(id);
  };
  let t = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i];
    const us = profile.timeDeltas[i + 1] ?? 0;
    if (t - profile.startTime < SKIP_US || profile.endTime - t < TAIL_US) continue;
    const node = byId.get(profile.samples[i]);
    const { functionName, url } = node.callFrame;
    if (functionName === '(idle)' || inHold(node.id)) continue;
    const name = frameName(node);
    self.set(name, (self.get(name) ?? 0) + us);
    const o = origin(url, functionName);
    origins.set(o, (origins.get(o) ?? 0) + us);
  }
}

const files = fs
  .readdirSync(dir)
  .filter((f) => f.endsWith('.cpuprofile'))
  .map((f) => JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')))
  .sort((a, b) => a.startTime - b.startTime);
for (let row = 0; row * PROCESSES < files.length; row++) {
  const self = new Map();
  const origins = new Map();
  for (const profile of files.slice(row * PROCESSES, (row + 1) * PROCESSES)) sum(profile, self, origins);
  let busy = 0;
  for (const us of origins.values()) busy += us;
  const ms = (us) => (us / 1000).toFixed(0);
  const share = (us) => `${((100 * us) / busy).toFixed(1)} %`;
  console.log(`\nrow ${row + 1}: ${ms(busy)} ms busy (not idle, not the hold)`);
  console.log([...origins].sort((a, b) => b[1] - a[1]).map(([o, us]) => `${o} ${share(us)}`).join(', '));
  for (const [name, us] of [...self].sort((a, b) => b[1] - a[1]).slice(0, TOP)) console.log(`  ${share(us).padStart(7)}  ${ms(us).padStart(6)} ms  ${name}`);
}
