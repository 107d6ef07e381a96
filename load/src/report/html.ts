import type { LoadReport, TargetRun } from "../result";
import { cpuPercentUncertainty } from "../stats/cpu-ticks";
import type { TimelineSample } from "../target/sampler";
import { METRICS, ROW_METRICS, formatCounts, formatMetric, formatWithUncertainty } from "./metrics";
import { bucketRates, bucketWidths, describeWidths, peakBucket, stepPoints, waveSegments, type Bucket } from "./rates";
import { lineChart, type Series } from "./svg";
import { cpuUncertaintyNote } from "./table";
import { annotateCpuUncertainty, waveUncertaintyUs } from "./uncertainty";

const COLORS: Record<string, string> = { ours: "#d9480f", baseline: "#1c7ed6" };

function esc(text: string): string {
  return text.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c] as string);
}

function colorOf(run: TargetRun, i: number): string {
  return COLORS[run.label] ?? ["#2b8a3e", "#862e9c"][i % 2] ?? "#000";
}

function summaryTable(report: LoadReport): string {
  const runs = report.runs;
  const keys = ROW_METRICS.filter((k) => runs.some((r) => r.summary[k] !== undefined));
  const head = `<tr><th>metric</th>${runs.map((r) => `<th>${esc(r.label)}</th>`).join("")}${runs.length === 2 ? "<th>ratio</th>" : ""}</tr>`;
  const rows = keys.map((k) => {
    const info = METRICS[k];
    const cells = runs.map((r) => `<td>${esc(formatMetric(r.summary, k))}</td>`).join("");
    const row = report.comparison?.find((c) => c.metric === k);
    const ratioCell = runs.length === 2 ? `<td>${row?.ratio === undefined ? "-" : `${row.ratio.toFixed(2)}×`}</td>` : "";
    return `<tr><td>${esc(info.label)}</td>${cells}${ratioCell}</tr>`;
  });
  return `<table>${head}${rows.join("")}</table>`;
}

/** A chart and, under it, what its points are. */
function figure(svg: string, caption: string): string {
  return `<figure>${svg}<figcaption>${esc(caption)}</figcaption></figure>`;
}

function perSecond(v: number): string {
  return v >= 100 ? Math.round(v).toLocaleString("en-US") : v.toFixed(1);
}

/** Bucket averages of one client counter for every run, with the widths and peaks a caption needs. */
function clientRates(runs: readonly TargetRun[], pick: (c: NonNullable<TimelineSample["client"]>) => number): Array<{ run: TargetRun; buckets: Bucket[] }> {
  return runs.map((run) => ({ run, buckets: bucketRates(run.timeline, (s) => (s.client ? pick(s.client) : undefined)) }));
}

function widthsOf(rates: ReadonlyArray<{ buckets: Bucket[] }>): string {
  return describeWidths(bucketWidths(rates.flatMap((r) => r.buckets)));
}

function peaksOf(rates: ReadonlyArray<{ run: TargetRun; buckets: Bucket[] }>, unit: string): string {
  return rates
    .map(({ run, buckets }) => {
      const peak = peakBucket(buckets);
      return peak ? `${run.label} ${perSecond(peak.rate)}${unit} (${peak.start.toFixed(1)}-${peak.end.toFixed(1)} s)` : `${run.label} none`;
    })
    .join(", ");
}

function charts(report: LoadReport): string {
  const runs = report.runs;
  const out: string[] = [];
  const sampleMs = report.options.sampleMs;
  // Phase markers only make sense on a shared time axis, i.e. with a single run.
  const marks = runs.length === 1 ? (runs[0]?.marks ?? []).map((m) => ({ x: m.t / 1000, label: m.label })) : [];
  const cdfSeries: Series[] = runs
    .filter((r) => r.latencyCdf && r.latencyCdf.length)
    .map((r, i) => ({ name: r.label, color: colorOf(r, i), step: true, points: (r.latencyCdf ?? []).map(([ms, f]) => [Math.max(1, ms), f] as [number, number]) }));
  if (cdfSeries.length) {
    out.push(
      figure(
        lineChart({
          title: "Latency CDF (receive time − message ts, in-time deliveries; ≤1 ms drawn at 1)",
          subtitle: "every in-time delivery counted once; not bucketed",
          xLabel: "latency, ms (log)",
          yLabel: "fraction of deliveries",
          series: cdfSeries,
          xLog: true,
          yMin: 0,
          yMax: 1,
        }),
        "Each step is the share of deliveries received within that latency, from the run's latency histogram; the table's p50/p95/p99 are read from the same histogram.",
      ),
    );
  }
  out.push(
    figure(
      lineChart({
        title: "Open connections over time",
        subtitle: `instantaneous count at each sample (every ${sampleMs} ms; client counters up to 250 ms old)`,
        marks,
        xLabel: "seconds since the run against each target started",
        yLabel: "open sockets",
        series: runs.map((r, i) => ({ name: r.label, color: colorOf(r, i), points: r.timeline.filter((s) => s.client).map((s) => [s.t / 1000, s.client?.open ?? 0] as [number, number]) })),
      }),
      "A count, not a rate: no averaging.",
    ),
  );
  const handshakes = clientRates(runs, (c) => c.handshakes);
  const waveSeries: Series[] = runs
    .map((r, i) => ({ name: `${r.label} per wave (table)`, color: colorOf(r, i), dashed: true, points: waveSegments(r) }))
    .filter((s) => s.points.length > 0);
  const handshakeWidths = widthsOf(handshakes);
  const tableRates = runs
    .filter((r) => r.summary.handshakesPerSecond !== undefined)
    .map((r) => `${r.label} ${perSecond(r.summary.handshakesPerSecond ?? 0)}/s`)
    .join(", ");
  out.push(
    figure(
      lineChart({
        title: "Handshakes per second",
        subtitle: `solid: average over each sample bucket (${handshakeWidths}); dashed: each wave's accepted ÷ its duration`,
        marks,
        xLabel: "seconds",
        yLabel: "handshakes/s",
        series: [
          ...handshakes.map(({ run, buckets }, i) => ({ name: `${run.label} bucket average`, color: colorOf(run, i), step: true, points: stepPoints(buckets) })),
          ...waveSeries,
        ],
      }),
      `The solid line is the handshakes completed in each sampling bucket divided by its width (${handshakeWidths}); a wave shorter than a bucket, or split across two, reads lower there than its own rate. ` +
        `Peak bucket: ${peaksOf(handshakes, "/s")}. The dashed segments are each wave's accepted handshakes ÷ the wave's duration, as in the wave table` +
        (tableRates ? `; the summary's handshakes/s is all accepted ÷ the total wave time (${tableRates}).` : "."),
    ),
  );
  if (runs.some((r) => r.timeline.some((s) => s.client && s.client.events > 0))) {
    const deliveries = clientRates(runs, (c) => c.events);
    const widths = widthsOf(deliveries);
    const table = runs
      .filter((r) => r.summary.deliveriesPerSecond !== undefined)
      .map((r) => `${r.label} ${perSecond(r.summary.deliveriesPerSecond ?? 0)}/s`)
      .join(", ");
    out.push(
      figure(
        lineChart({
          title: "Deliveries received per second",
          subtitle: `average over each sample bucket (${widths})`,
          marks,
          xLabel: "seconds",
          yLabel: "messages/s",
          series: deliveries.map(({ run, buckets }, i) => ({ name: run.label, color: colorOf(run, i), step: true, points: stepPoints(buckets) })),
        }),
        `Message events received by all clients in each sampling bucket ÷ its width (${widths}). Peak bucket: ${peaksOf(deliveries, "/s")}.` +
          (table ? ` The summary's deliveries/s is the events of the whole measured phase ÷ its duration (${table}).` : ""),
      ),
    );
  }
  if (runs.some((r) => r.timeline.some((s) => s.server))) {
    out.push(
      figure(
        lineChart({
          title: "Server memory (RSS) over time",
          subtitle: `instantaneous RSS at each sample (every ${sampleMs} ms); MB = 1,048,576 bytes`,
          marks,
          xLabel: "seconds",
          yLabel: "MB",
          series: runs.map((r, i) => ({ name: `${r.label} RSS`, color: colorOf(r, i), points: r.timeline.filter((s) => s.server).map((s) => [s.t / 1000, (s.server?.rssBytes ?? 0) / 1048576] as [number, number]) })),
        }),
        "Read from /proc/PID/status (VmRSS) at each sample; kernel socket buffers are not in it.",
      ),
    );
    const cpu = runs.map((run) => ({ run, buckets: bucketRates(run.timeline, (s) => s.server?.cpuUs) }));
    const widths = bucketWidths(cpu.flatMap((c) => c.buckets));
    const pm = widths ? cpuPercentUncertainty(widths.median) : undefined;
    const peaks = cpu
      .map(({ run, buckets }) => {
        const peak = peakBucket(buckets);
        return peak ? `${run.label} ${(peak.rate / 1e4).toFixed(0)}%` : `${run.label} none`;
      })
      .join(", ");
    const phase = runs
      .filter((r) => r.summary.serverCpuPercent !== undefined)
      .map((r) => `${r.label} ${(r.summary.serverCpuPercent ?? 0).toFixed(0)}%`)
      .join(", ");
    out.push(
      figure(
        lineChart({
          title: "Server CPU over time",
          subtitle: `% of one core, average over each sample bucket (${describeWidths(widths)})${pm === undefined ? "" : `, ±${pm.toFixed(0)} points`}`,
          marks,
          xLabel: "seconds",
          yLabel: "% of one core",
          // utime+stime in µs per s of wall time: ÷ 10,000 gives % of one core.
          series: cpu.map(({ run, buckets }, i) => ({ name: run.label, color: colorOf(run, i), step: true, points: stepPoints(buckets, 1 / 1e4) })),
        }),
        `utime+stime of the server process in each sampling bucket ÷ its width (${describeWidths(widths)}). CPU time counts 10 ms ticks, so a bucket${widths ? ` of ${widths.median.toFixed(2)} s` : ""} is known to ±2 ticks` +
          (pm === undefined ? "." : ` (±${pm.toFixed(1)} points of a core).`) +
          ` Peak bucket: ${peaks}.` +
          (phase ? ` The summary's server CPU is the average over its measured phase (${phase}).` : ""),
      ),
    );
  }
  out.push(
    figure(
      lineChart({
        title: "Machine MemAvailable drop since start (includes kernel socket memory and the clients)",
        subtitle: `instantaneous at each sample (every ${sampleMs} ms); MB = 1,048,576 bytes`,
        xLabel: "seconds",
        yLabel: "MB",
        series: runs.map((r, i) => {
          const first = r.timeline[0]?.machine.memAvailableBytes ?? 0;
          return { name: r.label, color: colorOf(r, i), dashed: true, points: r.timeline.map((s) => [s.t / 1000, (first - s.machine.memAvailableBytes) / 1048576] as [number, number]) };
        }),
      }),
      "Machine-wide: other processes move it too.",
    ),
  );
  return out.join("\n");
}

function runSection(run: TargetRun): string {
  const parts: string[] = [`<h3>${esc(run.label)} — ${esc(run.url)}</h3>`];
  if (!run.ok) parts.push(`<p class="bad">Failed: ${esc(run.error ?? "unknown error")}</p>`);
  if (run.server) parts.push(`<p>Server process ${run.server.pid} ${esc(run.server.name ?? "")}, descriptor limit ${run.server.descriptorLimit ?? "?"}</p>`);
  if (run.marks.length) parts.push(`<p>Phases: ${run.marks.map((m) => `${esc(m.label)} @ ${(m.t / 1000).toFixed(1)} s`).join(" · ")}</p>`);
  if (run.waves && run.waves.length) {
    parts.push(
      `<table><tr><th>wave</th><th>attempted</th><th>ok</th><th>seconds</th><th>handshakes/s (accepted ÷ wave time)</th><th>server CPU/handshake</th><th>failures</th></tr>${run.waves
        .map(
          (w) =>
            `<tr><td>${w.index}</td><td>${w.attempted}</td><td>${w.ok}</td><td>${w.seconds.toFixed(2)}</td><td>${Math.round(w.rate)}</td><td>${esc(formatWithUncertainty(w.serverCpuPerHandshakeUs, waveUncertaintyUs(w), "us"))}</td><td>${esc(formatCounts(w.failures))}</td></tr>`,
        )
        .join("")}</table>`,
    );
  }
  if (run.notes.length) parts.push(`<ul>${run.notes.map((n) => `<li>${esc(n)}</li>`).join("")}</ul>`);
  parts.push(`<details><summary>details</summary><pre>${esc(JSON.stringify(run.details, null, 2))}</pre></details>`);
  return parts.join("\n");
}

/**
 * A single HTML file with inline CSS and SVG: no scripts, no external assets.
 * Fills in the ± of per-operation CPU figures on the report first.
 */
export function renderHtml(report: LoadReport): string {
  annotateCpuUncertainty(report);
  const m = report.machine;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>load ${esc(report.scenario)} — ${esc(report.startedAt)}</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1100px;color:#212529;padding:0 16px}
table{border-collapse:collapse;margin:12px 0}td,th{border:1px solid #dee2e6;padding:3px 8px;text-align:right}
td:first-child,th:first-child{text-align:left}th{background:#f8f9fa}figure{margin:16px 0}figcaption,.note{color:#495057;font-size:13px;max-width:760px}
.bad{color:#c92a2a;font-weight:600}code,pre{background:#f8f9fa;padding:2px 4px}pre{padding:8px;overflow:auto;font-size:12px}
</style></head><body>
<h1>Load run: ${esc(report.scenario)}</h1>
<p>${esc(report.startedAt)} · ${m.cores} cores ${esc(m.cpuModel)} · ${(m.memTotalBytes / 2 ** 30).toFixed(1)} GB · Linux ${esc(m.kernel)} · Node ${esc(m.node)}</p>
<p><code>${esc(report.command)}</code></p>
<h2>Summary</h2>
${summaryTable(report)}
<p class="note">${esc(cpuUncertaintyNote())}. KB = 1,024 bytes, MB = 1,048,576 bytes.</p>
<h2>Charts</h2>
${charts(report)}
<h2>Runs</h2>
${report.runs.map(runSection).join("\n")}
</body></html>
`;
}
