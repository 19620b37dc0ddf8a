// Readings of a redis-server for the benches that measure load and memory: INFO sections, command
// counts, CPU from /proc, and the clients' memory from CLIENT LIST.
import { processCpu } from './process-cpu.mjs';

/** `INFO <section>` as { field: string }. */
export async function info(client, section) {
  const text = await client.info(section);
  const out = {};
  for (const line of text.split('\r\n')) {
    const i = line.indexOf(':');
    if (i > 0 && !line.startsWith('#')) out[line.slice(0, i)] = line.slice(i + 1);
  }
  return out;
}

/** Commands the harness sends itself (left out of every count): INFO, CLIENT LIST, DBSIZE, EXISTS (its queue probe), PING, FLUSHALL, SCRIPT. */
export const HARNESS_COMMANDS = new Set(['info', 'client|list', 'dbsize', 'exists', 'ping', 'flushall', 'script|flush', 'memory|usage', 'config|get']);

/** `INFO commandstats` as { command: calls } (a subcommand as `client|list`). */
export async function commandCalls(client) {
  const stats = await info(client, 'commandstats');
  const calls = {};
  for (const [field, value] of Object.entries(stats)) {
    if (!field.startsWith('cmdstat_')) continue;
    calls[field.slice('cmdstat_'.length)] = Number(/calls=(\d+)/.exec(value)?.[1] ?? 0);
  }
  return calls;
}

/** What changed between two {@link commandCalls} readings: every command's calls, the harness's left out. */
export function callsDelta(before, after) {
  const delta = {};
  for (const [name, calls] of Object.entries(after)) {
    if (HARNESS_COMMANDS.has(name)) continue;
    const d = calls - (before[name] ?? 0);
    if (d > 0) delta[name] = d;
  }
  return delta;
}

/** Script calls in a {@link callsDelta}: EVALSHA, EVAL and their read-only forms, FCALL. Each is one round trip. */
export function scriptCalls(delta) {
  let n = 0;
  for (const name of ['evalsha', 'eval', 'evalsha_ro', 'eval_ro', 'fcall', 'fcall_ro']) n += delta[name] ?? 0;
  return n;
}

/** The sum of a {@link callsDelta}: every command Redis ran, those run inside scripts included. */
export function totalCalls(delta) {
  return Object.values(delta).reduce((a, b) => a + b, 0);
}

/** A reading to take before and after a window: command counts, the server's CPU time, its memory. */
export async function serverReading(client, pid) {
  const [calls, memory] = await Promise.all([commandCalls(client), info(client, 'memory')]);
  return { at: performance.now(), calls, cpu: processCpu(pid), usedMemory: Number(memory.used_memory) };
}

/** Load between two {@link serverReading}s: seconds, commands and script calls per second, CPU % of one core. */
export function serverLoad(before, after) {
  const seconds = (after.at - before.at) / 1000;
  const delta = callsDelta(before.calls, after.calls);
  const cpu = after.cpu.user + after.cpu.system - before.cpu.user - before.cpu.system;
  return {
    seconds,
    commandsPerSecond: totalCalls(delta) / seconds,
    scriptCallsPerSecond: scriptCalls(delta) / seconds,
    cpuPercent: (cpu / (seconds * 1e6)) * 100,
    calls: delta,
  };
}

/** CLIENT LIST as objects of its fields (numbers where numeric). */
export async function clientList(client) {
  const text = await client.call('CLIENT', 'LIST');
  return text
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((line) =>
      Object.fromEntries(
        line
          .trim()
          .split(' ')
          .map((kv) => {
            const i = kv.indexOf('=');
            const k = kv.slice(0, i);
            const v = kv.slice(i + 1);
            return [k, /^-?\d+$/.test(v) ? Number(v) : v];
          }),
      ),
    );
}

/** The subscriber connections in a {@link clientList}: those subscribed to any channel or pattern. */
export function subscribers(clients) {
  return clients.filter((c) => (c.sub ?? 0) + (c.psub ?? 0) + (c.ssub ?? 0) > 0);
}
