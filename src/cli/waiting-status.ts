import { createLogUpdate } from 'log-update';
import type { LockInfo, Locks } from '../index.js';
import { formatDuration } from './duration.js';

/** How a holder is shown: who (as its manager registered itself), and since when, when known. */
export function describeHolder(info: LockInfo, now = Date.now()): string {
  if (!info.held) return 'free';
  const since = info.holder?.since;
  const who = !info.holder ? 'held (holder not recorded)' : `held by ${info.holder.who}${since == null ? '' : ` for ${formatDuration(Math.max(0, now - since))}`}`;
  return `${who}, ${info.ttl >= 0 ? `TTL ${formatDuration(info.ttl)} left` : 'no TTL'}`;
}

/**
 * The live status line of a waiting `exec`, on stderr, only when stderr is a terminal: who holds
 * the lock, for how long, and how long we have waited. Looks the lock up once a second and
 * redraws four times a second; `stop()` erases it.
 */
export function showWaiting(locks: Locks, key: string, since: number): { stop(): void } {
  if (!process.stderr.isTTY) return { stop: () => {} };
  const line = createLogUpdate(process.stderr);
  let info: LockInfo | undefined;
  let looking = false;
  let lookedAt = 0;
  const draw = (): void => {
    const now = Date.now();
    if (!looking && now - lookedAt >= 1000) {
      looking = true;
      lookedAt = now;
      locks.inspect(key).then(
        (i) => {
          info = i;
          looking = false;
        },
        () => {
          looking = false;
        },
      );
    }
    const holder = info ? describeHolder(info, now) : 'looking up the holder';
    line(`latchkey: waiting for "${key}": ${holder}; waited ${formatDuration(now - since)}`);
  };
  draw();
  const timer = setInterval(draw, 250);
  return {
    stop: () => {
      clearInterval(timer);
      line.clear();
      line.done();
    },
  };
}
