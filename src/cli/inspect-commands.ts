import Table from 'cli-table3';
import { createLogUpdate } from 'log-update';
import type { LockInfo } from '../index.js';
import { connect, type ConnectionOptions } from './connect.js';
import { formatDuration } from './duration.js';
import { CliError, EXIT } from './exit-codes.js';
import { describeHolder } from './waiting-status.js';

/**
 * A lock as `--json` prints it: LockInfo with its `name` as `key` (the table's word), plus how long
 * it has been held (ms), when recorded.
 */
function asJson(info: LockInfo, now: number): Record<string, unknown> {
  const { name, ...rest } = info;
  return { key: name, ...rest, heldFor: info.holder?.since != null ? Math.max(0, now - info.holder.since) : null };
}

/** The table of `list` and `watch`. */
export function lockTable(infos: readonly LockInfo[], now = Date.now()): string {
  if (infos.length === 0) return '(no locks held)';
  const table = new Table({ head: ['key', 'holder', 'held for', 'TTL left', 'fence', 'waiters'], style: { head: [], border: [] } });
  for (const i of infos) {
    table.push([
      i.name,
      i.holder?.who ?? '(not recorded)',
      i.holder?.since != null ? formatDuration(Math.max(0, now - i.holder.since)) : '-',
      i.ttl >= 0 ? formatDuration(i.ttl) : 'none',
      i.fence === null ? '-' : String(i.fence),
      String(i.queued),
    ]);
  }
  return table.toString();
}

export async function status(key: string, options: ConnectionOptions & { json?: boolean }): Promise<number> {
  const connection = await connect(options);
  try {
    const info = await connection.locks.inspect(key);
    const now = Date.now();
    if (options.json) process.stdout.write(`${JSON.stringify(asJson(info, now))}\n`);
    else {
      const extra = info.held ? `, fence ${info.fence}, ${info.queued} waiting` : '';
      process.stdout.write(`${key}: ${describeHolder(info, now)}${extra}\n`);
    }
    return info.held ? EXIT.OK : EXIT.FREE;
  } finally {
    await connection.close();
  }
}

export async function list(pattern: string, options: ConnectionOptions & { json?: boolean }): Promise<number> {
  const connection = await connect(options);
  try {
    const infos = await connection.locks.list(pattern);
    const now = Date.now();
    process.stdout.write(options.json ? `${JSON.stringify(infos.map((i) => asJson(i, now)))}\n` : `${lockTable(infos, now)}\n`);
    return EXIT.OK;
  } finally {
    await connection.close();
  }
}

/** Redraws the table in place every `interval` ms until Ctrl-C (or, when stdout is not a terminal, prints it each time). */
export async function watch(pattern: string, options: ConnectionOptions & { interval: number }): Promise<number> {
  const connection = await connect(options);
  const draw = process.stdout.isTTY ? createLogUpdate(process.stdout) : (text: string) => process.stdout.write(`${text}\n\n`);
  const stopped = new Promise<void>((resolve) => {
    process.once('SIGINT', resolve).once('SIGTERM', resolve);
  });
  try {
    for (;;) {
      // Ctrl-C ends a refresh that Redis does not answer too (the library gives up on it after 5s).
      const infos = await Promise.race([connection.locks.list(pattern), stopped]);
      if (!infos) return EXIT.OK;
      draw(`${lockTable(infos)}\n${connection.where} · ${new Date().toISOString()} · every ${formatDuration(options.interval)} · Ctrl-C to stop`);
      const tick = new Promise<'tick'>((resolve) => setTimeout(() => resolve('tick'), options.interval).unref());
      if ((await Promise.race([tick, stopped.then(() => 'stop' as const)])) === 'stop') return EXIT.OK;
    }
  } finally {
    await connection.close();
  }
}

export async function forceRelease(key: string, options: ConnectionOptions & { force?: boolean }): Promise<number> {
  if (!options.force) {
    throw new CliError(`release breaks whoever holds "${key}" (its work is no longer protected): add --force if that is what you want`, EXIT.USAGE);
  }
  const connection = await connect(options);
  try {
    const broken = await connection.locks.forceRelease(key);
    if (!broken) {
      process.stderr.write(`latchkey: "${key}" was not held\n`);
      return EXIT.FREE;
    }
    const who = !broken.holder ? 'holder not recorded' : broken.holder.since == null ? broken.holder.who : `${broken.holder.who}, held for ${formatDuration(Math.max(0, Date.now() - broken.holder.since))}`;
    process.stdout.write(`released "${key}" by force (${who}; fence ${broken.fence}); the next waiter, if any, has it now\n`);
    return EXIT.OK;
  } finally {
    await connection.close();
  }
}
