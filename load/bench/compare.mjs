#!/usr/bin/env node
// Runs one load scenario in two (or more) variants back to back, in one
// invocation, and prints their headline figures side by side with ratios
// against the first. On a noisy 2-core machine only such side-by-side ratios
// mean much.
//
//   node load/bench/compare.mjs \
//     --variant "coalescing::" \
//     --variant "one frame per message::--server-var BATCH_MAX_EVENTS=1" \
//     -- fanout --spawn --sockets 5000 --rate 40 --publishers 16 --duration 20
//
// Each variant's text after "::" is appended to the common arguments. A
// variant run with --baseline contributes two columns: "<name>" (ours) and
// "<name> (baseline)"; --baseline-only gives one column, the baseline's.
//
// --rounds N (before the "--") runs every variant N times, interleaved: round r
// runs the variants in an order rotated by r, so none always goes first (or
// last, after the machine warmed up). Each cell is then the median of the N
// rounds, with the lowest and highest and the spread (highest - lowest) /
// median beneath it; ratios are of medians.

import { spawnSync } from "node:child_process";
import { writeFileSync, mkdirSync } from "node:fs";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../../", import.meta.url));
const argv = process.argv.slice(2);
const split = argv.indexOf("--");
if (split < 0) {
  console.error('usage: compare.mjs --variant "name::extra args" [--variant ...] -- <scenario> [common options]');
  process.exit(2);
}
const variants = [];
let rounds = 1;
for (let i = 0; i < split; i++) {
  if (argv[i] === "--variant") {
    const [name, extra = ""] = argv[++i].split("::");
    variants.push({ name, extra: extra.split(/\s+/).filter(Boolean) });
  } else if (argv[i] === "--rounds") {
    rounds = Number(argv[++i]);
    if (!Number.isInteger(rounds) || rounds < 1 || rounds > 20) {
      console.error("--rounds takes an integer from 1 to 20");
      process.exit(2);
    }
  }
}
const common = argv.slice(split + 1);

const METRICS = [
  ["connected", "sockets connected", 0],
  ["connectFailures", "connect failures", 0],
  ["handshakesPerSecond", "handshakes/s (accepted)", 0],
  ["serverCpuPerHandshakeUs", "server CPU per handshake (µs)", 0],
  ["idleMemoryPerConnectionBytes", "server RSS per idle connection (KB)", 1, 1 / 1024],
  ["published", "messages published", 0],
  ["publishRate", "publish rate achieved (/s)", 1],
  ["historyRowsStoredPerMessage", "history rows stored per message (SQLite)", 3],
  ["expected", "deliveries expected", 0],
  ["delivered", "delivered in time", 0],
  ["deliveriesPerSecond", "deliveries/s", 0],
  ["serverCpuPerDeliveryUs", "server CPU per delivery (µs)", 2],
  ["deliveriesPerServerCpuSecond", "deliveries per server CPU-second", 0],
  ["eventsPerFrame", "messages per frame", 2],
  ["latencyP50Ms", "latency p50 (ms)", 0],
  ["latencyP95Ms", "latency p95 (ms)", 0],
  ["latencyP99Ms", "latency p99 (ms)", 0],
  ["latencyMaxMs", "latency max (ms)", 0],
  ["lost", "lost (late + never)", 0],
  ["lostLate", "  late (after deadline)", 0],
  ["lostNever", "  never received", 0],
  ["gaps", "seq gaps seen", 0],
  ["duplicates", "duplicates", 0],
  ["slowClients", "slow clients (stalled)", 0],
  ["slowClosed", "slow clients closed", 0],
  ["slowClosedAfterS", "first kick after stall, server (s)", 1],
  ["serverBehindPeak", "sockets behind at once, server (peak)", 0],
  ["serverCatchUpFrames", "frames sent from history, server", 0],
  ["serverRssPeakBytes", "server RSS peak (MB)", 1, 1 / 1048576],
  ["serverRssGrowthBytes", "server RSS growth, run (MB)", 1, 1 / 1048576],
  ["publishRssGrowthBytes", "server RSS growth, publishing (MB)", 1, 1 / 1048576],
  ["tcpMemGrowthBytes", "kernel TCP memory growth, machine (MB)", 1, 1 / 1048576],
  ["serverCpuPercent", "server CPU (% of a core)", 0],
  ["clientCpuPercent", "client CPU (% of a core)", 0],
  ["busiestClientProcessPercent", "busiest client process (% of a core)", 0],
  ["machineBusyPercent", "machine busy (%)", 0],
];

/** Per column (a variant's target run), in the order first seen: every round's summary. */
const columns = new Map();
const runsJson = [];
for (let round = 0; round < rounds; round++) {
  for (let k = 0; k < variants.length; k++) {
    const variant = variants[(k + round) % variants.length];
    const args = [`${root}load/dist/cli.js`, ...common, ...variant.extra, "--json", "--quiet", "--no-report"];
    console.error(`\n== round ${round + 1}/${rounds}, ${variant.name}: node ${args.slice(1).join(" ")}`);
    const run = spawnSync(process.execPath, args, { cwd: root, encoding: "utf8", maxBuffer: 256 * 1024 * 1024, stdio: ["ignore", "pipe", "inherit"] });
    if (run.status !== 0) {
      console.error(`${variant.name}: the load tool exited with ${run.status}`);
      process.exit(1);
    }
    const json = JSON.parse(run.stdout.slice(run.stdout.indexOf("{")));
    runsJson.push({ round: round + 1, name: variant.name, result: json });
    for (const [i, targetRun] of json.runs.entries()) {
      const name = i === 0 ? variant.name : `${variant.name} (${targetRun.label})`;
      if (!targetRun.ok) console.error(`${name}: FAILED: ${targetRun.error}`);
      const column = columns.get(name) ?? { name, order: variants.indexOf(variant) * 10 + i, rounds: [] };
      column.rounds.push({
        round: round + 1,
        summary: { ...targetRun.summary, ...timelineFigures(targetRun) },
        slow: targetRun.details?.slow,
        notes: targetRun.notes ?? [],
        closes: targetRun.details?.closesByCode,
      });
      columns.set(name, column);
    }
  }
}
// Columns in the order the variants were given, whatever order the rounds ran them in.
const results = [...columns.values()].sort((a, b) => a.order - b.order);

/**
 * Figures only the timeline holds: server RSS growth from the start of
 * publishing to its peak after it (what the publishing itself cost), and the
 * machine's kernel TCP memory growth over the run (socket buffers, which show
 * in no process's RSS; other processes move it too).
 */
function timelineFigures(targetRun) {
  const out = {};
  const samples = targetRun.timeline ?? [];
  const start = targetRun.marks?.find((m) => m.label.startsWith("publish"));
  if (start) {
    const from = samples.find((s) => s.t >= start.t && s.server);
    const later = samples.filter((s) => s.t >= start.t && s.server);
    if (from && later.length) out.publishRssGrowthBytes = Math.max(...later.map((s) => s.server.rssBytes)) - from.server.rssBytes;
    const tcpFrom = from?.machine.tcpMemBytes;
    if (tcpFrom !== undefined) out.tcpMemGrowthBytes = Math.max(...samples.filter((s) => s.t >= start.t).map((s) => s.machine.tcpMemBytes)) - tcpFrom;
  }
  return out;
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

const WIDTH = 24;
const pad = (text, width = WIDTH) => String(text).padStart(width);
const format = (value, digits) => value.toLocaleString("en-US", { maximumFractionDigits: digits });
const head = ["metric".padEnd(36), ...results.map((r) => pad(r.name)), ...results.slice(1).map((r) => pad(`${r.name} / ${results[0].name}`))];
const lines = [rounds > 1 ? `median of ${rounds} interleaved rounds; beneath each: lowest-highest (spread = (highest - lowest) / median)` : "one round", head.join("  ")];
for (const [key, label, digits, scale = 1] of METRICS) {
  const perColumn = results.map((r) => r.rounds.map((x) => x.summary[key]).filter((v) => typeof v === "number").map((v) => v * scale));
  if (perColumn.every((values) => values.length === 0)) continue;
  const medians = perColumn.map((values) => (values.length ? median(values) : null));
  const cells = medians.map((v) => pad(v === null ? "-" : format(v, digits)));
  const ratios = medians.slice(1).map((v) => pad(v !== null && medians[0] ? `${(v / medians[0]).toFixed(2)}x` : "-"));
  lines.push([label.padEnd(36), ...cells, ...ratios].join("  "));
  if (rounds > 1) {
    const spreads = perColumn.map((values, i) => {
      if (values.length < 2) return pad("");
      const lo = Math.min(...values);
      const hi = Math.max(...values);
      const spread = medians[i] ? ` (${(((hi - lo) / Math.abs(medians[i])) * 100).toFixed(1)}%)` : "";
      return pad(`${format(lo, digits)}-${format(hi, digits)}${spread}`);
    });
    lines.push(["".padEnd(36), ...spreads].join("  "));
  }
}
console.log(lines.join("\n"));
for (const r of results) {
  for (const x of r.rounds) {
    const tag = rounds > 1 ? `${r.name}, round ${x.round}` : r.name;
    if (x.closes && Object.keys(x.closes).length) console.log(`${tag}: closes by code ${JSON.stringify(x.closes)}`);
    if (x.slow) console.log(`${tag}: slow clients ${JSON.stringify({ ...x.slow, totals: undefined, note: undefined })}`);
  }
  // Notes are the same every round more often than not: each distinct one once.
  for (const note of new Set(r.rounds.flatMap((x) => x.notes))) console.log(`${r.name}: ${note}`);
}

mkdirSync(`${root}load/results`, { recursive: true });
const out = `${root}load/results/compare-${new Date().toISOString().replace(/[:.]/g, "-")}.json`;
writeFileSync(
  out,
  JSON.stringify(
    {
      command: process.argv.slice(1),
      rounds,
      columns: results.map((r) => ({ name: r.name, rounds: r.rounds.map((x) => ({ round: x.round, summary: x.summary })) })),
      results: runsJson,
    },
    null,
    2,
  ),
);
console.log(`\nresults: ${out}`);
