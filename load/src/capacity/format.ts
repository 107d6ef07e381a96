/**
 * Number formats of the capacity output. Bytes use the units of
 * docs/benchmarks.md (KB = 1,024 bytes, MB = 1,048,576, GB = 1,073,741,824);
 * link speeds are decimal bits per second, as links are sold.
 */

export const KB = 1024;
export const MB = 1024 ** 2;
export const GB = 1024 ** 3;

/** Three significant digits, thousands separators from 100 up; "unbounded" for infinity. */
export function fmt(v: number): string {
  if (!Number.isFinite(v)) return "unbounded";
  if (Math.abs(v) >= 100) return Math.round(v).toLocaleString("en-US");
  return Number(v.toPrecision(3)).toLocaleString("en-US");
}

export function bytes(v: number): string {
  if (!Number.isFinite(v)) return "unbounded";
  const a = Math.abs(v);
  if (a >= GB) return `${fmt(v / GB)} GB`;
  if (a >= MB) return `${fmt(v / MB)} MB`;
  if (a >= KB) return `${fmt(v / KB)} KB`;
  return `${fmt(v)} B`;
}

export function kb(v: number): string {
  return `${(v / KB).toFixed(1)} KB`;
}

export function mb(v: number): string {
  return `${Math.round(v / MB).toLocaleString("en-US")} MB`;
}

export function bitsPerSecond(v: number): string {
  if (!Number.isFinite(v)) return "unbounded";
  if (Math.abs(v) >= 1e9) return `${fmt(v / 1e9)} Gbit/s`;
  if (Math.abs(v) >= 1e6) return `${fmt(v / 1e6)} Mbit/s`;
  if (Math.abs(v) >= 1e3) return `${fmt(v / 1e3)} kbit/s`;
  return `${fmt(v)} bit/s`;
}

/** CPU demand given in µs of CPU per second of wall time, shown as ms of CPU per s. */
export function cpuPerSecond(us: number): string {
  return `${fmt(us / 1000)} ms/s`;
}

export function usd(v: number): string {
  if (!Number.isFinite(v)) return "-";
  if (v !== 0 && Math.abs(v) < 0.01) return `$${Number(v.toPrecision(2))}`;
  return `$${v.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;
}

/** Dollars per million with enough digits to compare figures that differ by orders of magnitude. */
export function usdPerMillion(v: number | undefined): string {
  if (v === undefined || !Number.isFinite(v)) return "n/a";
  if (v >= 1) return `$${v.toFixed(2)}`;
  return `$${Number(v.toPrecision(2))}`;
}

export function percent(share: number): string {
  if (!Number.isFinite(share)) return "unbounded";
  const p = share * 100;
  return `${p >= 10 ? p.toFixed(1) : p.toFixed(p >= 1 ? 1 : 2)}%`;
}
