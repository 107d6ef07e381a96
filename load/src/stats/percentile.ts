/**
 * Nearest-rank percentile of an ascending array: the smallest value such that
 * at least p% of the values are less than or equal to it. No interpolation, so
 * every reported figure is a latency that was actually observed.
 *
 * Returns NaN for an empty array. `p` is clamped to [0, 100]; p=0 gives the minimum.
 */
export function percentileOfSorted(sorted: readonly number[], p: number): number {
  const n = sorted.length;
  if (n === 0) return Number.NaN;
  const rank = nearestRank(n, p);
  return sorted[rank - 1] as number;
}

/** 1-based rank of the p-th percentile among n values (nearest-rank method). */
export function nearestRank(n: number, p: number): number {
  const clamped = Math.min(100, Math.max(0, p));
  // Rounded first so that e.g. 99.9% of 1000 is rank 999, not 1000 through floating-point error.
  const exact = Number(((clamped * n) / 100).toFixed(9));
  return Math.min(n, Math.max(1, Math.ceil(exact)));
}

/** Sorts a copy and returns the usual summary percentiles. */
export function summarize(values: readonly number[]): PercentileSummary {
  const sorted = [...values].sort((a, b) => a - b);
  const n = sorted.length;
  let sum = 0;
  for (const v of sorted) sum += v;
  return {
    count: n,
    min: n ? (sorted[0] as number) : Number.NaN,
    p50: percentileOfSorted(sorted, 50),
    p95: percentileOfSorted(sorted, 95),
    p99: percentileOfSorted(sorted, 99),
    max: n ? (sorted[n - 1] as number) : Number.NaN,
    mean: n ? sum / n : Number.NaN,
  };
}

export interface PercentileSummary {
  count: number;
  min: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
  mean: number;
}

/** The middle value (the mean of the two middle ones for an even count); NaN for none. */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  if (sorted.length === 0) return Number.NaN;
  return sorted.length % 2 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/** Several rounds of one figure: their median, lowest and highest, and the spread (highest - lowest) ÷ median. */
export interface Spread {
  median: number;
  low: number;
  high: number;
  /** (high - low) ÷ |median|; undefined when the median is 0. */
  spread: number | undefined;
  rounds: number;
}

export function spreadOf(values: readonly number[]): Spread {
  const m = median(values);
  const low = Math.min(...values);
  const high = Math.max(...values);
  return { median: m, low, high, spread: m ? (high - low) / Math.abs(m) : undefined, rounds: values.length };
}

/** "median (low-high, spread%)" with `digits` decimals; just the median for one round. */
export function formatSpread(s: Spread, digits = 0, format: (n: number, digits: number) => string = (n, d) => n.toFixed(d)): string {
  if (s.rounds < 2) return format(s.median, digits);
  const spread = s.spread === undefined ? "" : `, ${(s.spread * 100).toFixed(1)}%`;
  return `${format(s.median, digits)} (${format(s.low, digits)}-${format(s.high, digits)}${spread})`;
}
