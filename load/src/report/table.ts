import type { ComparisonRow, LoadReport, TargetRun } from "../result";
import { METRICS, formatValue, ratio, type MetricKey } from "./metrics";

/** Builds the ours-vs-baseline rows for every figure both runs have. */
export function compareRuns(ours: TargetRun, baseline: TargetRun): ComparisonRow[] {
  const rows: ComparisonRow[] = [];
  for (const key of Object.keys(METRICS) as MetricKey[]) {
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

/** The final human-readable table. */
export function renderText(report: LoadReport): string {
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
          const unit = METRICS[row.metric as MetricKey].unit;
          return [row.label, formatValue(row.ours, unit), formatValue(row.baseline, unit), row.ratio === undefined ? "-" : `${row.ratio.toFixed(2)}x`];
        }),
      ),
    );
  } else {
    for (const run of report.runs) {
      const rows = (Object.keys(METRICS) as MetricKey[])
        .filter((k) => run.summary[k] !== undefined)
        .map((k) => [METRICS[k].label, formatValue(run.summary[k], METRICS[k].unit)]);
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
            formatValue(w.serverCpuPerHandshakeUs, "us"),
            Object.keys(w.failures).length ? JSON.stringify(w.failures) : "-",
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
  return out.join("\n");
}
