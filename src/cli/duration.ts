import ms from 'ms';
import { CliError, EXIT } from './exit-codes.js';

/**
 * A duration from the command line, in ms: `30s`, `5m`, `1.5h`, `250ms`, or a bare number of
 * milliseconds. Refuses anything else, negative values and values past `max`, naming the option.
 */
export function parseDuration(text: string, option: string, max = 2 ** 31 - 1): number {
  const trimmed = text.trim();
  const value = /^\d+$/.test(trimmed) ? Number(trimmed) : (ms as (s: string) => number | undefined)(trimmed);
  if (value === undefined || !Number.isFinite(value) || value < 0 || trimmed === '') {
    throw new CliError(`${option}: invalid duration "${text}" (expected e.g. 30s, 5m, 1h or a number of milliseconds)`, EXIT.USAGE);
  }
  if (value > max) throw new CliError(`${option}: ${text} is too long (at most ${formatDuration(max)})`, EXIT.USAGE);
  return Math.round(value);
}

/** A duration for people: `850ms`, `12s`, `3m 05s`, `2h 10m`, `3d 4h`. */
export function formatDuration(millis: number): string {
  if (millis < 1000) return `${Math.max(0, Math.round(millis))}ms`;
  const s = Math.floor(millis / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(s % 60).padStart(2, '0')}s`;
  const h = Math.floor(m / 60);
  if (h < 24) return `${h}h ${String(m % 60).padStart(2, '0')}m`;
  return `${Math.floor(h / 24)}d ${h % 24}h`;
}
