import type { ComparisonRow, LoadReport, TargetRun } from "../result";
import { CPU_DELTA_TICKS, CPU_TICK_US } from "../stats/cpu-ticks";
import { METRICS, ROW_METRICS, formatCounts, formatMetric, formatWithUncertainty, ratio, type MetricKey } from "./metrics";
import { annotateCpuUncertainty, waveUncertaintyUs } from "./uncertainty";

/** Builds the ours-vs-baseline rows for every figure either run has (a ± travels with its figure, not as a row). */
export function compareRuns(ours: TargetRun, baseline: TargetRun): ComparisonRow[] {
  const rows: ComparisonRow[] = [];
  for (const key of ROW_METRICS) {
    const a = ours.summary[key];
    const b = baseline.summary[key];
    if (a === undefined && b === undefined) continue;
    const row: ComparisonRow = { metric: key, label: METRICS[key].label };
    if (a !== undefined) row.ours = a;
    if (b !== undefined) row.baseline = b;
    const r = ratio(a, b);
    if (r !== undefined) row.ratio = r;
    rows.push(row);
  }
  return rows;
}

function pad(text: string, width: number, right = false): string {
  return right ? text.padStart(width) : text.padEnd(width);
}

function grid(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]): string => cells.map((c, i) => pad(c, widths[i] as number, i > 0)).join("  ");
  return [line(header), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)].join("\n");
}

function runHeader(run: TargetRun): string {
  const server = run.server ? ` (server pid ${run.server.pid}${run.server.name ? ` ${run.server.name}` : ""})` : "";
  return `${run.label}: ${run.url}${server}${run.ok ? "" : `  FAILED: ${run.error}`}`;
}

/** What a ± on a CPU figure means, printed under any table that has one. */
export function cpuUncertaintyNote(): string {
  return `± on server CPU figures: utime+stime count ${CPU_TICK_US / 1000} ms clock ticks, so a phase's CPU is known to ±${CPU_DELTA_TICKS} ticks (${(CPU_DELTA_TICKS * CPU_TICK_US) / 1000} ms), divided by the operations it is shared over`;
}

function hasCpuUncertainty(report: LoadReport): boolean {
  return report.runs.some(
    (r) =>
      (Object.keys(r.summary) as MetricKey[]).some((k) => "uncertaintyOf" in METRICS[k]) || (r.waves ?? []).some((w) => waveUncertaintyUs(w) !== undefined),
  );
}

/**
 * The final human-readable table. Fills in the ± of per-operation CPU figures
 * on the report first (see annotateCpuUncertainty).
 */
export function renderText(report: LoadReport): string {
  annotateCpuUncertainty(report);
  const out: string[] = [];
  const m = report.machine;
  out.push(`scenario ${report.scenario} — ${m.cores} cores ${m.cpuModel}, ${(m.memTotalBytes / 2 ** 30).toFixed(1)} GB, Linux ${m.kernel}, Node ${m.node}`);
  out.push(`command: ${report.command}`);
  for (const run of report.runs) out.push(runHeader(run));
  out.push("");
  const [first, second] = report.runs;
  if (report.comparison && first && second) {
    out.push(
      grid(
        ["metric", first.label, second.label, `${first.label}/${second.label}`],
        report.comparison.map((row) => {
          const key = row.metric as MetricKey;
          return [row.label, formatMetric(first.summary, key), formatMetric(second.summary, key), row.ratio === undefined ? "-" : `${row.ratio.toFixed(2)}x`];
        }),
      ),
    );
  } else {
    for (const run of report.runs) {
      const rows = ROW_METRICS.filter((k) => run.summary[k] !== undefined).map((k) => [METRICS[k].label, formatMetric(run.summary, k)]);
      if (rows.length) out.push(grid(["metric", run.label], rows));
    }
  }
  for (const run of report.runs) {
    if (run.waves && run.waves.length > 1) {
      out.push("");
      out.push(`${run.label} waves:`);
      out.push(
        grid(
          ["wave", "attempted", "ok", "seconds", "handshakes/s", "server CPU/handshake", "failures"],
          run.waves.map((w) => [
            String(w.index),
            String(w.attempted),
            String(w.ok),
            w.seconds.toFixed(2),
            Math.round(w.rate).toString(),
            formatWithUncertainty(w.serverCpuPerHandshakeUs, waveUncertaintyUs(w), "us"),
            formatCounts(w.failures),
          ]),
        ),
      );
    }
    const failures = run.details.connectFailuresByCause as Record<string, number> | undefined;
    if (failures && Object.keys(failures).length) out.push(`${run.label} connect failures by cause: ${JSON.stringify(failures)}`);
    const closes = run.details.closesByCode as Record<string, number> | undefined;
    if (closes && Object.keys(closes).length) out.push(`${run.label} closes by code: ${JSON.stringify(closes)}`);
    for (const note of run.notes) out.push(`${run.label}: ${note}`);
  }
  if (hasCpuUncertainty(report)) out.push(cpuUncertaintyNote());
  return out.join("\n");
}
