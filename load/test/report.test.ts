import { describe, expect, it } from "vitest";
import { parseLoadOptions } from "../src/options";
import { renderHtml } from "../src/report/html";
import { METRICS, ROW_METRICS, formatMetric, formatValue, formatWithUncertainty, roundBoundUp } from "../src/report/metrics";
import { bucketRates, bucketWidths, describeWidths, peakBucket, stepPoints, waveSegments } from "../src/report/rates";
import { lineChart } from "../src/report/svg";
import { compareRuns, renderText } from "../src/report/table";
import { annotateCpuUncertainty, cpuUncertainties, deliveryInterval, type WaveWithUncertainty } from "../src/report/uncertainty";
import type { LoadReport, TargetRun } from "../src/result";
import { CPU_TICK_US, cpuDeltaUncertaintyUs, cpuPercentUncertainty, perCpuSecondUncertainty, perOperationUncertaintyUs } from "../src/stats/cpu-ticks";
import type { TimelineSample } from "../src/target/sampler";

function sample(t: number, phase: string, cpuUs: number, client: { handshakes?: number; events?: number; open?: number } = {}): TimelineSample {
  return {
    t,
    phase,
    machine: { memAvailableBytes: 8e9, tcpMemBytes: 0, tcpInUse: 0, cpuBusyTicks: 0, cpuTotalTicks: 0 },
    machineBusy: 0,
    server: { rssBytes: 100 * 1048576, cpuUs, fds: 10, threads: 4 },
    client: { cpuUs: 0, workerCpuUs: [], rssBytes: 0, open: client.open ?? 0, handshakes: client.handshakes ?? 0, failures: 0, events: client.events ?? 0, frames: client.events ?? 0, reconnecting: 0 },
  };
}

/**
 * A fanout-like run: 10,000 deliveries between the "publish" mark (t = 2 s,
 * CPU 1.0 s) and the "settle" mark (t = 12 s, CPU 1.315 s): 31.5 µs each.
 * Timer samples in between do not sit on marks.
 */
function fanoutRun(label = "ours"): TargetRun {
  const timeline = [
    sample(0, "setup", 500_000),
    sample(1000, "connect", 600_000, { handshakes: 0 }),
    sample(1500, "connect", 800_000, { handshakes: 500, open: 500 }),
    sample(2000, "publish", 1_000_000, { handshakes: 1000, open: 1000 }),
    sample(7000, "publish", 1_150_000, { handshakes: 1000, open: 1000, events: 5000 }),
    sample(12_000, "settle", 1_315_000, { handshakes: 1000, open: 1000, events: 10_000 }),
  ];
  return {
    label,
    url: "http://127.0.0.1:1",
    ok: true,
    startedAt: "2026-12-01T00:00:00.000Z",
    durationMs: 12_000,
    summary: {
      connected: 1000,
      handshakesPerSecond: 971,
      serverCpuPerHandshakeUs: 400,
      deliveriesPerSecond: 1000,
      serverCpuPerDeliveryUs: 31.5,
      deliveriesPerServerCpuSecond: 1e6 / 31.5,
    },
    details: {},
    waves: [
      { index: 1, attempted: 500, ok: 500, seconds: 0.5, rate: 1000, failures: {}, serverCpuPerHandshakeUs: 400 },
      { index: 2, attempted: 500, ok: 500, seconds: 0.5, rate: 1000, failures: {}, serverCpuPerHandshakeUs: 400 },
    ],
    timeline,
    marks: [
      { t: 1000, label: "connect" },
      { t: 2000, label: "publish" },
      { t: 12_000, label: "settle" },
    ],
    notes: [],
  };
}

function reportOf(runs: TargetRun[]): LoadReport {
  return {
    tool: "edge-fanout-load",
    schema: 1,
    bench: "load",
    scenario: "fanout",
    startedAt: "2026-12-01T00:00:00.000Z",
    command: "npm run load -- fanout",
    options: parseLoadOptions(["fanout"]),
    machine: { cpuModel: "test", cores: 2, memTotalBytes: 2 ** 34, kernel: "6", node: "v20" },
    runs,
  };
}

describe("CPU tick uncertainty", () => {
  it("bounds a utime+stime difference by two 10 ms ticks and spreads it over the operations", () => {
    expect(CPU_TICK_US).toBe(10_000);
    expect(cpuDeltaUncertaintyUs()).toBe(20_000);
    expect(perOperationUncertaintyUs(50_000)).toBeCloseTo(0.4, 12);
    expect(perOperationUncertaintyUs(1000)).toBe(20);
    expect(perOperationUncertaintyUs(0)).toBeUndefined();
  });

  it("gives a rate per CPU-second the CPU's relative error, and a CPU share the bound over the bucket", () => {
    // 1 s of CPU is ±2%: 31,746 deliveries per CPU-second ± 635
    expect(perCpuSecondUncertainty(31_746, 1e6)).toBeCloseTo(634.92, 2);
    expect(perCpuSecondUncertainty(1, 0)).toBeUndefined();
    expect(cpuPercentUncertainty(0.5)).toBeCloseTo(4, 12);
  });

  it("rounds the bound up and prints the figure to the same decimal place", () => {
    expect(roundBoundUp(0.4)).toEqual({ value: 0.4, decimals: 1 });
    expect(roundBoundUp(0.31)).toEqual({ value: 0.4, decimals: 1 });
    expect(roundBoundUp(1.32)).toEqual({ value: 1.4, decimals: 1 });
    expect(roundBoundUp(20)).toEqual({ value: 20, decimals: 0 });
    expect(roundBoundUp(0.3)).toEqual({ value: 0.3, decimals: 1 });
    expect(formatWithUncertainty(31.5, 0.4, "us")).toBe("31.5 ± 0.4 µs");
    expect(formatWithUncertainty(408.3, 20, "us")).toBe("408 ± 20 µs");
    expect(formatWithUncertainty(49.7, 1.32, "us")).toBe("49.7 ± 1.4 µs");
    expect(formatWithUncertainty(31_746, 635, "per-second")).toBe("31,746 ± 700");
    expect(formatWithUncertainty(31.5, undefined, "us")).toBe("31.5 µs");
  });
});

describe("uncertainty carried by a run", () => {
  it("finds the measured phase from the marks: the pair that reproduces the summary", () => {
    const interval = deliveryInterval(fanoutRun());
    expect(interval).toEqual({ seconds: 10, serverCpuUs: 315_000, operations: 10_000 });
  });

  it("derives the ± of CPU per handshake, per delivery and deliveries per CPU-second", () => {
    const pm = cpuUncertainties(fanoutRun());
    expect(pm.serverCpuPerHandshakeUsPlusMinus).toBeCloseTo(20, 12); // 20 ms over 1,000 handshakes
    expect(pm.serverCpuPerDeliveryUsPlusMinus).toBeCloseTo(2, 12); // 20 ms over 10,000 deliveries
    expect(pm.deliveriesPerServerCpuSecondPlusMinus).toBeCloseTo((1e6 / 31.5) * (20_000 / 315_000), 6);
  });

  it("gives no ± when no phase reproduces the figure", () => {
    const run = fanoutRun();
    run.summary.serverCpuPerDeliveryUs = 99;
    expect(deliveryInterval(run)).toBeUndefined();
    expect(cpuUncertainties(run).serverCpuPerDeliveryUsPlusMinus).toBeUndefined();
  });

  it("writes the ± into the summary and wave rows that go to JSON, once", () => {
    const report = reportOf([fanoutRun()]);
    annotateCpuUncertainty(report);
    annotateCpuUncertainty(report);
    const json = JSON.parse(JSON.stringify(report)) as LoadReport;
    expect(json.runs[0]?.summary.serverCpuPerDeliveryUsPlusMinus).toBeCloseTo(2, 12);
    expect((json.runs[0]?.waves?.[0] as WaveWithUncertainty).serverCpuPerHandshakeUsPlusMinus).toBeCloseTo(40, 12);
  });

  it("prints the ± in the text table and says what it is; a ± is never a row of its own", () => {
    const report = reportOf([fanoutRun()]);
    const text = renderText(report);
    expect(text).toMatch(/server CPU per delivery\s+32 ± 2 µs/);
    expect(text).toMatch(/deliveries per server CPU-second\s+31,746 ± 3,000/);
    expect(text).toContain("400 ± 20 µs");
    expect(text).toContain("400 ± 40 µs"); // one wave: 20 ms over 500 handshakes
    expect(text).toContain("±2 ticks (20 ms)");
    expect(text).not.toMatch(/, ±/);
    expect(ROW_METRICS.some((k) => "uncertaintyOf" in METRICS[k])).toBe(false);
    const rows = compareRuns(fanoutRun("ours"), fanoutRun("baseline"));
    expect(rows.some((r) => r.metric.endsWith("PlusMinus"))).toBe(false);
    expect(formatMetric(report.runs[0]?.summary ?? {}, "serverCpuPerDeliveryUs")).toContain("±");
  });

  it("keeps units consistent: ms with a decimal below 10, KB = 1,024 and MB = 1,048,576 bytes", () => {
    expect(formatValue(0.4, "ms")).toBe("0.4 ms");
    expect(formatValue(48, "ms")).toBe("48 ms");
    expect(formatValue(89.2 * 1024, "bytes")).toBe("89.2 KB");
    expect(formatValue(576 * 1048576, "bytes")).toBe("576.0 MB");
    expect(formatValue(1500, "us")).toBe("1,500 µs");
  });
});

describe("chart rates", () => {
  const run = fanoutRun();

  it("averages a counter over buckets of at least the minimum width and keeps their widths and peak", () => {
    const buckets = bucketRates(run.timeline, (s) => s.client?.handshakes);
    // 0→1 s: 0/s, 1→1.5 s: 1,000/s, 1.5→2 s: 1,000/s, then 0 over 5 s buckets
    expect(buckets.map((b) => b.rate)).toEqual([0, 1000, 1000, 0, 0]);
    expect(bucketWidths(buckets)).toEqual({ median: 1, min: 0.5, max: 5 }); // widths 1, 0.5, 0.5, 5, 5
    expect(peakBucket(buckets)).toMatchObject({ start: 1, end: 1.5, rate: 1000 });
    expect(describeWidths({ median: 0.5, min: 0.5, max: 0.52 })).toBe("0.50 s");
    expect(describeWidths(bucketWidths(buckets))).toBe("median 1.00 s, 0.50-5.00 s");
  });

  it("merges spans shorter than the minimum into the next bucket", () => {
    const timeline = [sample(0, "a", 0, { events: 0 }), sample(100, "b", 0, { events: 100 }), sample(600, "b", 0, { events: 600 })];
    expect(bucketRates(timeline, (s) => s.client?.events)).toEqual([{ start: 0, end: 0.6, rate: 1000 }]);
  });

  it("holds each bucket's average across the bucket, and draws waves as separate segments", () => {
    expect(stepPoints([{ start: 0, end: 1, rate: 5 }, { start: 1, end: 3, rate: 7 }])).toEqual([[0, 5], [1, 7], [3, 7]]);
    const segments = waveSegments(run);
    expect(segments.slice(0, 2)).toEqual([[1, 1000], [1.5, 1000]]);
    expect(Number.isNaN(segments[2]?.[1])).toBe(true);
    expect(segments.slice(3)).toEqual([[1.5, 1000], [2, 1000]]);
  });

  it("breaks a line at a non-finite point", () => {
    const svg = lineChart({ title: "t", subtitle: "what a point is", xLabel: "x", yLabel: "y", series: [{ name: "s", points: [[0, 1], [1, 2], [1, Number.NaN], [2, 3], [3, 4]] }] });
    const path = /<path d="([^"]+)"/.exec(svg)?.[1] ?? "";
    expect(path.match(/M/g)?.length).toBe(2);
    expect(svg).toContain("what a point is");
  });
});

describe("HTML report labels", () => {
  it("says which charts average over buckets, how wide they are, their peak, and how the table's figure differs", () => {
    const report = reportOf([fanoutRun()]);
    const html = renderHtml(report);
    expect(html).toContain("Handshakes per second");
    expect(html).toContain("average over each sample bucket");
    expect(html).toContain("Peak bucket: ours 1,000/s (1.0-1.5 s)");
    expect(html).toContain("the summary's handshakes/s is all accepted ÷ the total wave time (ours 971/s)");
    expect(html).toContain("ours per wave (table)");
    expect(html).toContain("Deliveries received per second");
    expect(html).toContain("The summary's deliveries/s is the events of the whole measured phase");
    expect(html).toContain("% of one core, average over each sample bucket");
    expect(html).toContain("MB = 1,048,576 bytes");
    expect(html).toContain("<td>32 ± 2 µs</td>");
    expect(html).toContain("<td>400 ± 40 µs</td>");
  });
});

/** The `<svg>` of the chart titled `title` in an HTML report. */
function chartTitled(html: string, title: string): string {
  const at = html.indexOf(`aria-label="${title}"`);
  expect(at).toBeGreaterThan(-1);
  return html.slice(html.lastIndexOf("<svg", at), html.indexOf("</svg>", at) + 6);
}

/** The y-axis tick labels of a chart (right-aligned just left of the plot), as numbers. */
function yTicks(svg: string): number[] {
  return [...svg.matchAll(/<text x="58" y="[\d.]+" font-size="11" text-anchor="end" dominant-baseline="middle"[^>]*>([^<]+)<\/text>/g)].map((m) => Number((m[1] as string).replace(/k$/, "e3")));
}

describe("HTML report charts", () => {
  it("extends the y axis to a tick at or above every series drawn, the dashed per-wave rates included", () => {
    // Buckets peak at 400/s; the waves' own rate (accepted ÷ wave time) is 444/s, drawn dashed.
    const run = fanoutRun();
    run.timeline = [sample(0, "setup", 0), sample(1000, "connect", 0), sample(2000, "connect", 0, { handshakes: 400 }), sample(3000, "connect", 0, { handshakes: 800 })];
    run.waves = [
      { index: 1, attempted: 400, ok: 400, seconds: 0.9, rate: 444, failures: {}, serverCpuPerHandshakeUs: 400 },
      { index: 2, attempted: 400, ok: 400, seconds: 0.9, rate: 444, failures: {}, serverCpuPerHandshakeUs: 400 },
    ];
    const svg = chartTitled(renderHtml(reportOf([run])), "Handshakes per second");
    expect(svg).toContain("per wave (table)");
    const ticks = yTicks(svg);
    expect(ticks.length).toBeGreaterThan(2);
    expect(Math.max(...ticks)).toBeGreaterThanOrEqual(444);
  });

  it("keeps every line inside the plot, under its highest tick", () => {
    const svg = lineChart({ title: "t", xLabel: "x", yLabel: "y", series: [{ name: "s", points: [[0, 0], [1, 444], [2, 100]] }] });
    const ticks = yTicks(svg);
    expect(Math.max(...ticks)).toBe(500);
    const plotTop = Number(/<rect x="64" y="([\d.]+)"/.exec(svg)?.[1]);
    const ys = [...(/<path d="([^"]+)"/.exec(svg)?.[1] ?? "").matchAll(/[ML][\d.]+,([\d.]+)/g)].map((m) => Number(m[1]));
    expect(Math.min(...ys)).toBeGreaterThanOrEqual(plotTop);
  });

  it("keeps phase labels inside the chart: one near the right edge ends at its line", () => {
    const width = 760;
    const svg = lineChart({
      title: "t",
      xLabel: "x",
      yLabel: "y",
      width,
      series: [{ name: "s", points: [[0, 1], [100, 2]] }],
      marks: [
        { x: 0, label: "connect" },
        { x: 99, label: "settle and drain the last sockets" },
      ],
    });
    const labels = [...svg.matchAll(/<text x="([\d.]+)" y="[\d.]+" font-size="10" fill="#868e96"( text-anchor="end")?>([^<]+)<\/text>/g)].map((m) => ({
      x: Number(m[1]),
      end: m[2] !== undefined,
      text: m[3] as string,
    }));
    expect(labels.map((l) => l.text)).toEqual(["connect", "settle and drain the last sockets"]);
    const [first, last] = labels as [(typeof labels)[0], (typeof labels)[0]];
    expect(first.end).toBe(false);
    expect(last.end).toBe(true);
    // An end-anchored label spans [x - its width, x]: both ends inside the chart.
    expect(last.x).toBeLessThanOrEqual(width);
    expect(last.x - last.text.length * 6).toBeGreaterThanOrEqual(0);
  });
});

describe("HTML report tables", () => {
  it("prints no empty failure object: a wave without failures reads '-', one with failures names them", () => {
    const run = fanoutRun();
    run.waves = [
      { index: 1, attempted: 500, ok: 500, seconds: 0.5, rate: 1000, failures: {}, serverCpuPerHandshakeUs: 400 },
      { index: 2, attempted: 500, ok: 497, seconds: 0.5, rate: 994, failures: { "client EMFILE": 3 }, serverCpuPerHandshakeUs: 400 },
    ];
    const report = reportOf([run]);
    const html = renderHtml(report);
    expect(html).not.toContain("{}</td>");
    expect(html).toContain("<td>-</td></tr>");
    expect(html).toContain("<td>client EMFILE 3</td></tr>");
    expect(renderText(report)).not.toMatch(/\{\}/);
  });
});
