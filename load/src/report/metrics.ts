/**
 * The figures a run can produce, with how to print them and which direction is
 * better. Results carry them as a flat `summary` record so tables, JSON and
 * the capacity calculator all read the same names.
 */
export type Unit = "count" | "per-second" | "us" | "ms" | "bytes" | "percent" | "ratio" | "seconds";

export interface MetricInfo {
  label: string;
  unit: Unit;
  /** Which way is better, for ratios; undefined = neither (a count of what was asked). */
  better?: "lower" | "higher";
  /** This figure is the ± of another one (printed beside it, never as a row of its own). */
  uncertaintyOf?: string;
}

export const METRICS = {
  socketsRequested: { label: "sockets requested", unit: "count" },
  connected: { label: "sockets connected", unit: "count", better: "higher" },
  connectFailures: { label: "connect failures", unit: "count", better: "lower" },
  clientSideFailures: { label: "  of which client-side limits", unit: "count" },
  handshakesPerSecond: { label: "handshakes/s (accepted, all waves)", unit: "per-second", better: "higher" },
  handshakeP50Ms: { label: "handshake p50", unit: "ms", better: "lower" },
  handshakeP99Ms: { label: "handshake p99", unit: "ms", better: "lower" },
  welcomeP99Ms: { label: "time to welcome p99", unit: "ms", better: "lower" },
  serverCpuPerHandshakeUs: { label: "server CPU per handshake", unit: "us", better: "lower" },
  serverCpuPerHandshakeUsPlusMinus: { label: "server CPU per handshake, ±", unit: "us", uncertaintyOf: "serverCpuPerHandshakeUs" },
  idleMemoryPerConnectionBytes: { label: "server RSS per idle connection", unit: "bytes", better: "lower" },
  idleMemoryPerSubscriptionBytes: { label: "server RSS per idle subscription (multiplexed)", unit: "bytes", better: "lower" },
  subscriptions: { label: "subscriptions (multiplexed: rooms followed over all connections)", unit: "count" },
  allSubscribedMs: { label: "subscribe storm: until every room is subscribed", unit: "ms", better: "lower" },
  subscribeP99Ms: { label: "one connection's rooms subscribed, p99", unit: "ms", better: "lower" },
  subscribeRefusals: { label: "subscribes refused (all codes)", unit: "count", better: "lower" },
  refusalsSent: { label: "frames sent by non-reading connections (--refusers)", unit: "count" },
  refusersClosed: { label: "  non-reading connections the server closed", unit: "count" },
  systemMemoryPerConnectionBytes: { label: "MemAvailable drop per connection (minus client RSS)", unit: "bytes", better: "lower" },
  kernelTcpMemoryPerConnectionBytes: { label: "kernel TCP memory per connection (both ends)", unit: "bytes", better: "lower" },
  serverFdsPerConnection: { label: "server descriptors per connection", unit: "ratio", better: "lower" },
  published: { label: "messages published (accepted)", unit: "count" },
  historyRowsStoredPerMessage: { label: "history rows in the rooms' storage per message (SQLite)", unit: "ratio", better: "lower" },
  publishFailures: { label: "publish failures", unit: "count", better: "lower" },
  publishRate: { label: "publish rate achieved (all rooms)", unit: "per-second", better: "higher" },
  publishHttpP99Ms: { label: "publish HTTP p99", unit: "ms", better: "lower" },
  expected: { label: "deliveries expected", unit: "count" },
  delivered: { label: "delivered in time", unit: "count", better: "higher" },
  deliveriesPerSecond: { label: "deliveries/s", unit: "per-second", better: "higher" },
  serverCpuPerDeliveryUs: { label: "server CPU per delivery", unit: "us", better: "lower" },
  serverCpuPerDeliveryUsPlusMinus: { label: "server CPU per delivery, ±", unit: "us", uncertaintyOf: "serverCpuPerDeliveryUs" },
  deliveriesPerServerCpuSecond: { label: "deliveries per server CPU-second", unit: "per-second", better: "higher" },
  deliveriesPerServerCpuSecondPlusMinus: { label: "deliveries per server CPU-second, ±", unit: "per-second", uncertaintyOf: "deliveriesPerServerCpuSecond" },
  eventsPerFrame: { label: "messages per frame (coalescing)", unit: "ratio" },
  latencyP50Ms: { label: "latency p50 (ts -> receive)", unit: "ms", better: "lower" },
  latencyP95Ms: { label: "latency p95", unit: "ms", better: "lower" },
  latencyP99Ms: { label: "latency p99", unit: "ms", better: "lower" },
  latencyMaxMs: { label: "latency max", unit: "ms", better: "lower" },
  allReachedP50Ms: { label: "publish to every socket p50", unit: "ms", better: "lower" },
  allReachedP99Ms: { label: "publish to every socket p99", unit: "ms", better: "lower" },
  fromRequestP99Ms: { label: "latency p99 from publish request", unit: "ms", better: "lower" },
  lost: { label: "lost (late + never)", unit: "count", better: "lower" },
  lostLate: { label: "  late (after deadline)", unit: "count", better: "lower" },
  lostNever: { label: "  never received", unit: "count", better: "lower" },
  gaps: { label: "seq gaps seen", unit: "count", better: "lower" },
  duplicates: { label: "duplicates", unit: "count", better: "lower" },
  outOfOrder: { label: "out of order (below the highest seq seen)", unit: "count", better: "lower" },
  lostEventSeqs: { label: "seqs declared lost by server (lost events)", unit: "count", better: "lower" },
  slowClients: { label: "slow clients (stalled)", unit: "count" },
  slowClosed: { label: "slow clients closed by server", unit: "count" },
  slowClosedAfterS: { label: "first slow-consumer kick after stall (server stats)", unit: "seconds" },
  slowLatencyP99Ms: { label: "slow clients: latency p99 of what they got", unit: "ms" },
  slowLost: { label: "slow clients: lost", unit: "count" },
  serverBehindPeak: { label: "sockets behind at once, server stats (peak)", unit: "count" },
  serverCatchUpFrames: { label: "frames sent from history, server stats", unit: "count" },
  serverBufferedPeakBytes: { label: "server-reported buffered bytes (peak)", unit: "bytes", better: "lower" },
  allBackMs: { label: "time until all clients are back", unit: "ms", better: "lower" },
  downtimeP50Ms: { label: "per-client downtime p50", unit: "ms", better: "lower" },
  downtimeP99Ms: { label: "per-client downtime p99", unit: "ms", better: "lower" },
  notBack: { label: "clients not back", unit: "count", better: "lower" },
  reconnectAttempts: { label: "reconnect attempts", unit: "count" },
  reconnectFailures: { label: "reconnect attempts failed", unit: "count", better: "lower" },
  serverRssPeakBytes: { label: "server RSS peak", unit: "bytes", better: "lower" },
  serverRssGrowthBytes: { label: "server RSS growth during run", unit: "bytes", better: "lower" },
  serverCpuPercent: { label: "server CPU (% of one core, measured phase)", unit: "percent" },
  clientCpuPercent: { label: "client CPU (% of one core, all processes)", unit: "percent" },
  busiestClientProcessPercent: { label: "busiest client process (% of one core)", unit: "percent" },
  machineBusyPercent: { label: "machine busy (% of all cores)", unit: "percent" },
} as const satisfies Record<string, MetricInfo>;

export type MetricKey = keyof typeof METRICS;
export type Summary = Partial<Record<MetricKey, number>>;

const KB = 1024;

/** Keys of figures printed as rows: every metric but the ± of another. */
export const ROW_METRICS: readonly MetricKey[] = (Object.keys(METRICS) as MetricKey[]).filter((k) => !("uncertaintyOf" in METRICS[k]));

/** The key holding the ± of `key`, if it has one. */
export function uncertaintyKeyOf(key: MetricKey): MetricKey | undefined {
  return (Object.keys(METRICS) as MetricKey[]).find((k) => {
    const info: MetricInfo = METRICS[k];
    return info.uncertaintyOf === key;
  });
}

/** Human form of one figure. KB and MB are 1,024 and 1,048,576 bytes, as in docs/benchmarks.md. */
export function formatValue(value: number | undefined, unit: Unit): string {
  if (value === undefined || Number.isNaN(value)) return "-";
  switch (unit) {
    case "count":
      return Math.round(value).toLocaleString("en-US");
    case "per-second":
      return value >= 100 ? Math.round(value).toLocaleString("en-US") : value.toFixed(1);
    case "us":
      return value >= 100 ? `${Math.round(value).toLocaleString("en-US")} µs` : `${value.toFixed(1)} µs`;
    case "ms":
      // Below 10 ms a whole number hides most of the figure (0.4 ms is not 0 ms).
      return Math.abs(value) < 10 ? `${value.toFixed(1)} ms` : `${Math.round(value).toLocaleString("en-US")} ms`;
    case "seconds":
      return `${value.toFixed(1)} s`;
    case "bytes":
      if (Math.abs(value) >= 10 * KB * KB) return `${(value / KB / KB).toFixed(1)} MB`;
      if (Math.abs(value) >= 10 * KB) return `${(value / KB).toFixed(1)} KB`;
      return `${Math.round(value)} B`;
    case "percent":
      return `${value.toFixed(0)}%`;
    case "ratio":
      return value.toFixed(2);
  }
}

const UNIT_SUFFIX: Partial<Record<Unit, string>> = { us: " µs", ms: " ms", seconds: " s", percent: "%" };

/**
 * An uncertainty bound rounded up (a bound rounded down would no longer be
 * one) to one significant digit, or two when the first is a 1 (rounding 1.3
 * up to 2 would overstate it by half), and the decimals that needs.
 */
export function roundBoundUp(bound: number): { value: number; decimals: number } {
  if (!(bound > 0) || !Number.isFinite(bound)) return { value: 0, decimals: 0 };
  let exponent = Math.floor(Math.log10(bound));
  if (bound / 10 ** exponent < 2) exponent -= 1;
  const step = 10 ** exponent;
  // The small allowance keeps 0.3/0.1 = 2.9999999999999996 from rounding up to 4.
  const digits = Math.ceil(bound / step - 1e-9);
  const value = Number((digits * step).toPrecision(12));
  return { value, decimals: Math.max(0, -exponent) };
}

/**
 * A figure with its ±, both to the decimal place of the ± (rounded up):
 * "31.5 ± 0.4 µs". Without a usable ±, the figure alone.
 */
export function formatWithUncertainty(value: number | undefined, plusMinus: number | undefined, unit: Unit): string {
  if (value === undefined || Number.isNaN(value)) return "-";
  if (plusMinus === undefined || !(plusMinus > 0) || !Number.isFinite(plusMinus)) return formatValue(value, unit);
  const rounded = roundBoundUp(plusMinus);
  // Past three decimals the figure stops being readable; 0.001 still bounds the error.
  const bound = rounded.decimals > 3 ? { value: 0.001, decimals: 3 } : rounded;
  const decimals = bound.decimals;
  const shown = (v: number): string => v.toLocaleString("en-US", { minimumFractionDigits: decimals, maximumFractionDigits: decimals });
  return `${shown(value)} ± ${shown(bound.value)}${UNIT_SUFFIX[unit] ?? ""}`;
}

/** One summary figure as printed, with its ± when the summary has one. */
export function formatMetric(summary: Summary, key: MetricKey): string {
  // Results written by another version of the tool may name figures this one does not know.
  const info = METRICS[key] as MetricInfo | undefined;
  if (!info) return summary[key] === undefined ? "-" : String(summary[key]);
  const plusMinusKey = uncertaintyKeyOf(key);
  const plusMinus = plusMinusKey ? summary[plusMinusKey] : undefined;
  return formatWithUncertainty(summary[key], plusMinus, info.unit);
}

/** ours / baseline, or undefined when either side is missing or zero. */
export function ratio(ours: number | undefined, base: number | undefined): number | undefined {
  if (ours === undefined || base === undefined || !Number.isFinite(ours) || !Number.isFinite(base) || base === 0) return undefined;
  return ours / base;
}

/** Counts by cause ("EMFILE": 3): "-" when there are none, rather than an empty object. */
export function formatCounts(counts: Readonly<Record<string, number>>): string {
  const entries = Object.entries(counts).filter(([, n]) => n > 0);
  return entries.length ? entries.map(([cause, n]) => `${cause} ${n.toLocaleString("en-US")}`).join(", ") : "-";
}
