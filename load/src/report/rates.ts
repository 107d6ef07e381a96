/**
 * Rates drawn from a run's timeline. A chart point is the average of a
 * cumulative counter over one sampling bucket, which is not the figure the
 * summary table prints (e.g. accepted handshakes over a whole wave): these
 * helpers keep the bucket widths and the peak so charts can say which is which.
 */
import type { TargetRun } from "../result";
import type { TimelineSample } from "../target/sampler";

/** One sampling bucket: [start, end] in seconds since the run started, and the counter's average rate over it. */
export interface Bucket {
  start: number;
  end: number;
  rate: number;
}

export interface BucketWidths {
  median: number;
  min: number;
  max: number;
}

/**
 * Average rate of a cumulative counter over successive buckets of at least
 * `minSeconds`. Client counters arrive every 250 ms and CPU time in 10 ms
 * ticks, so spans shorter than about half a second (phase-boundary samples
 * taken just after a timer sample) are merged into the next bucket.
 */
export function bucketRates(timeline: readonly TimelineSample[], pick: (s: TimelineSample) => number | undefined, minSeconds = 0.45): Bucket[] {
  const out: Bucket[] = [];
  let a = timeline.find((s) => pick(s) !== undefined);
  if (!a) return out;
  for (const b of timeline) {
    const vb = pick(b);
    const va = pick(a);
    if (vb === undefined || va === undefined) continue;
    const dt = (b.t - a.t) / 1000;
    if (dt < minSeconds) continue;
    out.push({ start: a.t / 1000, end: b.t / 1000, rate: (vb - va) / dt });
    a = b;
  }
  return out;
}

/** Median, shortest and longest bucket, s. */
export function bucketWidths(buckets: readonly Bucket[]): BucketWidths | undefined {
  if (buckets.length === 0) return undefined;
  const widths = buckets.map((b) => b.end - b.start).sort((x, y) => x - y);
  return { median: widths[Math.floor((widths.length - 1) / 2)] as number, min: widths[0] as number, max: widths[widths.length - 1] as number };
}

/** The bucket with the highest average. */
export function peakBucket(buckets: readonly Bucket[]): Bucket | undefined {
  let peak: Bucket | undefined;
  for (const b of buckets) if (!peak || b.rate > peak.rate) peak = b;
  return peak;
}

/**
 * Points for a step line that holds each bucket's average over the whole
 * bucket (drawn with `step: true`): one point at each start, one at the end.
 */
export function stepPoints(buckets: readonly Bucket[], scale = 1): Array<[number, number]> {
  const points: Array<[number, number]> = buckets.map((b) => [b.start, b.rate * scale]);
  const last = buckets[buckets.length - 1];
  if (last) points.push([last.end, last.rate * scale]);
  return points;
}

/**
 * Each connect wave as a flat segment at its own rate (accepted ÷ the wave's
 * duration, the figure the wave table prints), placed from the "connect"
 * mark: waves run back to back. Segments are separated by a NaN point, which
 * the chart draws as a gap.
 */
export function waveSegments(run: TargetRun): Array<[number, number]> {
  const connect = run.marks.find((m) => m.label === "connect");
  if (!connect || !run.waves?.length) return [];
  const points: Array<[number, number]> = [];
  let t = connect.t / 1000;
  for (const wave of run.waves) {
    if (points.length) points.push([t, Number.NaN]);
    points.push([t, wave.rate], [t + wave.seconds, wave.rate]);
    t += wave.seconds;
  }
  return points;
}

/** "0.50 s" or "0.45-1.20 s": how wide the buckets behind a chart are. */
export function describeWidths(widths: BucketWidths | undefined): string {
  if (!widths) return "no buckets";
  const f = (v: number): string => `${v.toFixed(2)} s`;
  return Math.abs(widths.max - widths.min) < 0.05 ? f(widths.median) : `median ${f(widths.median)}, ${widths.min.toFixed(2)}-${f(widths.max)}`;
}
