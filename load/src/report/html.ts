import type { LoadReport, TargetRun } from "../result";
import { METRICS, formatValue, type MetricKey } from "./metrics";
import { lineChart, type Series } from "./svg";

const COLORS: Record<string, string> = { ours: "#d9480f", baseline: "#1c7ed6" };

function esc(text: string): string {
  return text.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c] as string);
}

function colorOf(run: TargetRun, i: number): string {
  return COLORS[run.label] ?? ["#2b8a3e", "#862e9c"][i % 2] ?? "#000";
}

function summaryTable(report: LoadReport): string {
  const runs = report.runs;
  const keys = (Object.keys(METRICS) as MetricKey[]).filter((k) => runs.some((r) => r.summary[k] !== undefined));
  const head = `<tr><th>metric</th>${runs.map((r) => `<th>${esc(r.label)}</th>`).join("")}${runs.length === 2 ? "<th>ratio</th>" : ""}</tr>`;
  const rows = keys.map((k) => {
    const info = METRICS[k];
    const cells = runs.map((r) => `<td>${esc(formatValue(r.summary[k], info.unit))}</td>`).join("");
    const row = report.comparison?.find((c) => c.metric === k);
    const ratioCell = runs.length === 2 ? `<td>${row?.ratio === undefined ? "-" : `${row.ratio.toFixed(2)}×`}</td>` : "";
    return `<tr><td>${esc(info.label)}</td>${cells}${ratioCell}</tr>`;
  });
  return `<table>${head}${rows.join("")}</table>`;
}

/** Per-interval rate of a cumulative client counter, from the timeline. */
function rateSeries(run: TargetRun, pick: (s: NonNullable<TargetRun["timeline"][number]["client"]>) => number): Array<[number, number]> {
  // Client counters arrive every 250 ms; rates over shorter spans (phase-boundary samples) would be noise.
  const out: Array<[number, number]> = [];
  let a = run.timeline.find((s) => s.client);
  for (const b of run.timeline) {
    if (!a?.client || !b.client) continue;
    const dt = (b.t - a.t) / 1000;
    if (dt < 0.45) continue;
    out.push([b.t / 1000, (pick(b.client) - pick(a.client)) / dt]);
    a = b;
  }
  return out;
}

function charts(report: LoadReport): string {
  const runs = report.runs;
  const out: string[] = [];
  // Phase markers only make sense on a shared time axis, i.e. with a single run.
  const marks = runs.length === 1 ? (runs[0]?.marks ?? []).map((m) => ({ x: m.t / 1000, label: m.label })) : [];
  const cdfSeries: Series[] = runs
    .filter((r) => r.latencyCdf && r.latencyCdf.length)
    .map((r, i) => ({ name: r.label, color: colorOf(r, i), step: true, points: (r.latencyCdf ?? []).map(([ms, f]) => [Math.max(1, ms), f] as [number, number]) }));
  if (cdfSeries.length) {
    out.push(
      lineChart({
        title: "Latency CDF (receive time − message ts, in-time deliveries; ≤1 ms drawn at 1)",
        xLabel: "latency, ms (log)",
        yLabel: "fraction of deliveries",
        series: cdfSeries,
        xLog: true,
        yMin: 0,
        yMax: 1,
      }),
    );
  }
  out.push(
    lineChart({
      title: "Open connections over time",
        marks,
      xLabel: "seconds since the run against each target started",
      yLabel: "open sockets",
      series: runs.map((r, i) => ({ name: r.label, color: colorOf(r, i), points: r.timeline.filter((s) => s.client).map((s) => [s.t / 1000, s.client?.open ?? 0] as [number, number]) })),
    }),
  );
  out.push(
    lineChart({
      title: "Handshake rate over time",
        marks,
      xLabel: "seconds",
      yLabel: "handshakes/s",
      series: runs.map((r, i) => ({ name: r.label, color: colorOf(r, i), points: rateSeries(r, (c) => c.handshakes) })),
    }),
  );
  if (runs.some((r) => r.timeline.some((s) => s.client && s.client.events > 0))) {
    out.push(
      lineChart({
        title: "Deliveries received per second",
        marks,
        xLabel: "seconds",
        yLabel: "messages/s",
        series: runs.map((r, i) => ({ name: r.label, color: colorOf(r, i), points: rateSeries(r, (c) => c.events) })),
      }),
    );
  }
  if (runs.some((r) => r.timeline.some((s) => s.server))) {
    out.push(
      lineChart({
        title: "Server memory (RSS) over time",
        marks,
        xLabel: "seconds",
        yLabel: "MB",
        series: runs.map((r, i) => ({ name: `${r.label} RSS`, color: colorOf(r, i), points: r.timeline.filter((s) => s.server).map((s) => [s.t / 1000, (s.server?.rssBytes ?? 0) / 1048576] as [number, number]) })),
      }),
    );
    out.push(
      lineChart({
        title: "Server CPU over time",
        marks,
        xLabel: "seconds",
        yLabel: "% of one core",
        series: runs.map((r, i) => {
          // CPU time has 10 ms resolution: short spans between phase-boundary samples would be noise.
          const pts: Array<[number, number]> = [];
          let a = r.timeline.find((s) => s.server);
          for (const b of r.timeline) {
            if (!a?.server || !b.server || b.t - a.t < 450) continue;
            pts.push([b.t / 1000, ((b.server.cpuUs - a.server.cpuUs) / 1000 / (b.t - a.t)) * 100]);
            a = b;
          }
          return { name: r.label, color: colorOf(r, i), points: pts };
        }),
      }),
    );
  }
  out.push(
    lineChart({
      title: "Machine MemAvailable drop since start (includes kernel socket memory and the clients)",
      xLabel: "seconds",
      yLabel: "MB",
      series: runs.map((r, i) => {
        const first = r.timeline[0]?.machine.memAvailableBytes ?? 0;
        return { name: r.label, color: colorOf(r, i), dashed: true, points: r.timeline.map((s) => [s.t / 1000, (first - s.machine.memAvailableBytes) / 1048576] as [number, number]) };
      }),
    }),
  );
  return out.map((svg) => `<figure>${svg}</figure>`).join("\n");
}

function runSection(run: TargetRun): string {
  const parts: string[] = [`<h3>${esc(run.label)} — ${esc(run.url)}</h3>`];
  if (!run.ok) parts.push(`<p class="bad">Failed: ${esc(run.error ?? "unknown error")}</p>`);
  if (run.server) parts.push(`<p>Server process ${run.server.pid} ${esc(run.server.name ?? "")}, descriptor limit ${run.server.descriptorLimit ?? "?"}</p>`);
  if (run.marks.length) parts.push(`<p>Phases: ${run.marks.map((m) => `${esc(m.label)} @ ${(m.t / 1000).toFixed(1)} s`).join(" · ")}</p>`);
  if (run.waves && run.waves.length) {
    parts.push(
      `<table><tr><th>wave</th><th>attempted</th><th>ok</th><th>seconds</th><th>handshakes/s</th><th>server CPU/handshake</th><th>failures</th></tr>${run.waves
        .map(
          (w) =>
            `<tr><td>${w.index}</td><td>${w.attempted}</td><td>${w.ok}</td><td>${w.seconds.toFixed(2)}</td><td>${Math.round(w.rate)}</td><td>${esc(formatValue(w.serverCpuPerHandshakeUs, "us"))}</td><td>${esc(JSON.stringify(w.failures))}</td></tr>`,
        )
        .join("")}</table>`,
    );
  }
  if (run.notes.length) parts.push(`<ul>${run.notes.map((n) => `<li>${esc(n)}</li>`).join("")}</ul>`);
  parts.push(`<details><summary>details</summary><pre>${esc(JSON.stringify(run.details, null, 2))}</pre></details>`);
  return parts.join("\n");
}

/** A single HTML file with inline CSS and SVG: no scripts, no external assets. */
export function renderHtml(report: LoadReport): string {
  const m = report.machine;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>load ${esc(report.scenario)} — ${esc(report.startedAt)}</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1100px;color:#212529;padding:0 16px}
table{border-collapse:collapse;margin:12px 0}td,th{border:1px solid #dee2e6;padding:3px 8px;text-align:right}
td:first-child,th:first-child{text-align:left}th{background:#f8f9fa}figure{margin:16px 0}
.bad{color:#c92a2a;font-weight:600}code,pre{background:#f8f9fa;padding:2px 4px}pre{padding:8px;overflow:auto;font-size:12px}
</style></head><body>
<h1>Load run: ${esc(report.scenario)}</h1>
<p>${esc(report.startedAt)} · ${m.cores} cores ${esc(m.cpuModel)} · ${(m.memTotalBytes / 2 ** 30).toFixed(1)} GB · Linux ${esc(m.kernel)} · Node ${esc(m.node)}</p>
<p><code>${esc(report.command)}</code></p>
<h2>Summary</h2>
${summaryTable(report)}
<h2>Charts</h2>
${charts(report)}
<h2>Runs</h2>
${report.runs.map(runSection).join("\n")}
</body></html>
`;
}
