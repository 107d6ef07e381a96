import { nearestRank, type PercentileSummary } from "./percentile";

/** Serialized form of a {@link Histogram}: only non-empty buckets travel between processes. */
export interface HistogramJSON {
  /** Largest value with its own bucket; larger values share the overflow bucket. */
  ceiling: number;
  /** [value, count] pairs of non-empty buckets, ascending. */
  buckets: Array<[number, number]>;
  count: number;
  sum: number;
  min: number;
  max: number;
}

/**
 * Counts integer values (milliseconds) in one bucket per value from 0 to
 * `ceiling`, with one overflow bucket above. At that resolution percentiles are
 * exact, and histograms from several client processes merge by adding counts,
 * so the merged percentiles equal those of the pooled raw values.
 *
 * Latencies are integer milliseconds because the server stamps `ts` with
 * Date.now(); finer client-side resolution would only pretend to be precise.
 */
export class Histogram {
  readonly ceiling: number;
  private readonly counts: Uint32Array;
  private total = 0;
  private sumOfValues = 0;
  private minValue = Number.POSITIVE_INFINITY;
  private maxValue = Number.NEGATIVE_INFINITY;

  constructor(ceiling: number) {
    if (!Number.isInteger(ceiling) || ceiling < 0) throw new RangeError(`histogram ceiling must be a non-negative integer, got ${ceiling}`);
    this.ceiling = ceiling;
    this.counts = new Uint32Array(ceiling + 2);
  }

  /** Records one value; negatives count as 0 (the caller decides whether that is a clock problem). */
  add(value: number, times = 1): void {
    const v = value < 0 ? 0 : Math.round(value);
    const index = v > this.ceiling ? this.ceiling + 1 : v;
    this.counts[index] = (this.counts[index] as number) + times;
    this.total += times;
    this.sumOfValues += v * times;
    if (v < this.minValue) this.minValue = v;
    if (v > this.maxValue) this.maxValue = v;
  }

  get count(): number {
    return this.total;
  }

  get min(): number {
    return this.total ? this.minValue : Number.NaN;
  }

  get max(): number {
    return this.total ? this.maxValue : Number.NaN;
  }

  get mean(): number {
    return this.total ? this.sumOfValues / this.total : Number.NaN;
  }

  /** Nearest-rank percentile, same definition as {@link percentileOfSorted}. NaN when empty. */
  percentile(p: number): number {
    if (this.total === 0) return Number.NaN;
    const rank = nearestRank(this.total, p);
    let seen = 0;
    for (let i = 0; i <= this.ceiling; i++) {
      seen += this.counts[i] as number;
      if (seen >= rank) return i;
    }
    return this.maxValue; // the rank lies in the overflow bucket: the exact max is the honest answer there
  }

  summary(): PercentileSummary {
    return {
      count: this.total,
      min: this.min,
      p50: this.percentile(50),
      p95: this.percentile(95),
      p99: this.percentile(99),
      max: this.max,
      mean: this.mean,
    };
  }

  /** Cumulative distribution as [value, fraction ≤ value] points, one per non-empty bucket. */
  cdf(): Array<[number, number]> {
    const points: Array<[number, number]> = [];
    if (this.total === 0) return points;
    let seen = 0;
    for (let i = 0; i <= this.ceiling + 1; i++) {
      const c = this.counts[i] as number;
      if (c === 0) continue;
      seen += c;
      points.push([i > this.ceiling ? this.maxValue : i, seen / this.total]);
    }
    return points;
  }

  /** Adds another histogram's counts into this one. Ceilings must match. */
  merge(other: Histogram | HistogramJSON): this {
    const json = other instanceof Histogram ? other.toJSON() : other;
    if (json.ceiling !== this.ceiling) throw new RangeError(`cannot merge histograms with ceilings ${json.ceiling} and ${this.ceiling}`);
    if (json.count === 0) return this;
    for (const [value, count] of json.buckets) {
      const index = value > this.ceiling ? this.ceiling + 1 : value;
      this.counts[index] = (this.counts[index] as number) + count;
    }
    this.total += json.count;
    this.sumOfValues += json.sum;
    this.minValue = Math.min(this.minValue, json.min);
    this.maxValue = Math.max(this.maxValue, json.max);
    return this;
  }

  toJSON(): HistogramJSON {
    const buckets: Array<[number, number]> = [];
    for (let i = 0; i < this.counts.length; i++) {
      const c = this.counts[i] as number;
      if (c > 0) buckets.push([i, c]);
    }
    return { ceiling: this.ceiling, buckets, count: this.total, sum: this.sumOfValues, min: this.min, max: this.max };
  }

  static fromJSON(json: HistogramJSON): Histogram {
    return new Histogram(json.ceiling).merge(json);
  }
}
