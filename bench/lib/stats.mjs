// Small statistics helpers. Sample sizes here are at most a few hundred thousand values, so a
// sorted array is exact and fast enough.

/** Sorts a copy of `values` ascending. */
export function sorted(values) {
  return Float64Array.from(values).sort();
}

/** Nearest-rank percentile `p` (0–100) of an ascending array; NaN when empty. */
export function percentile(asc, p) {
  if (asc.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * asc.length);
  return asc[Math.min(asc.length - 1, Math.max(0, rank - 1))];
}

/** n, p50, p99, max and mean of `values`. */
export function summarize(values) {
  const asc = sorted(values);
  let sum = 0;
  for (const v of asc) sum += v;
  return {
    n: asc.length,
    p50: percentile(asc, 50),
    p99: percentile(asc, 99),
    max: asc.length ? asc[asc.length - 1] : NaN,
    mean: asc.length ? sum / asc.length : NaN,
  };
}

/** The median of `values` (the mean of the two middle ones for an even count); NaN when empty. */
export function median(values) {
  const s = sorted(values);
  if (s.length === 0) return NaN;
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

/**
 * Jain's fairness index of per-participant counts: (Σx)² / (n·Σx²). 1 when everyone got the same
 * share, 1/n when one participant got everything. Participants with 0 count as such.
 */
export function jain(counts) {
  const n = counts.length;
  let sum = 0;
  let squares = 0;
  for (const c of counts) {
    sum += c;
    squares += c * c;
  }
  return squares === 0 ? NaN : (sum * sum) / (n * squares);
}
