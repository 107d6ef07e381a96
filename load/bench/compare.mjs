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
// Each variant's text after "::" is appended to the common arguments.

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
for (let i = 0; i < split; i++) {
  if (argv[i] === "--variant") {
    const [name, extra = ""] = argv[++i].split("::");
    variants.push({ name, extra: extra.split(/\s+/).filter(Boolean) });
  }
}
const common = argv.slice(split + 1);

const METRICS = [
  ["connected", "sockets connected", 0],
  ["published", "messages published", 0],
  ["deliveriesPerSecond", "deliveries/s", 0],
  ["serverCpuPerDeliveryUs", "server CPU per delivery (µs)", 2],
  ["deliveriesPerServerCpuSecond", "deliveries per server CPU-second", 0],
  ["eventsPerFrame", "messages per frame", 2],
  ["latencyP50Ms", "latency p50 (ms)", 0],
  ["latencyP95Ms", "latency p95 (ms)", 0],
  ["latencyP99Ms", "latency p99 (ms)", 0],
  ["latencyMaxMs", "latency max (ms)", 0],
  ["lost", "lost (late + never)", 0],
  ["gaps", "seq gaps seen", 0],
  ["serverRssPeakBytes", "server RSS peak (MB)", 1, 1 / 1048576],
  ["serverCpuPercent", "server CPU (% of a core)", 0],
  ["clientCpuPercent", "client CPU (% of a core)", 0],
  ["machineBusyPercent", "machine busy (%)", 0],
];

const results = [];
for (const variant of variants) {
  const args = [`${root}load/dist/cli.js`, ...common, ...variant.extra, "--json", "--quiet", "--no-report"];
  console.error(`\n== ${variant.name}: node ${args.slice(1).join(" ")}`);
  const run = spawnSync(process.execPath, args, { cwd: root, encoding: "utf8", maxBuffer: 256 * 1024 * 1024, stdio: ["ignore", "pipe", "inherit"] });
  if (run.status !== 0) {
    console.error(`${variant.name}: the load tool exited with ${run.status}`);
    process.exit(1);
  }
  const json = JSON.parse(run.stdout.slice(run.stdout.indexOf("{")));
  const summary = json.runs[0].summary;
  const slow = json.runs[0].details?.slow;
  results.push({ name: variant.name, summary, slow, json });
}

const pad = (text, width) => String(text).padStart(width);
const head = ["metric".padEnd(36), ...results.map((r) => pad(r.name, 24)), ...results.slice(1).map((r) => pad(`${r.name} / ${results[0].name}`, 24))];
const lines = [head.join("  ")];
for (const [key, label, digits, scale = 1] of METRICS) {
  const values = results.map((r) => (typeof r.summary[key] === "number" ? r.summary[key] * scale : null));
  if (values.every((v) => v === null)) continue;
  const cells = values.map((v) => pad(v === null ? "-" : v.toLocaleString("en-US", { maximumFractionDigits: digits }), 24));
  const ratios = values.slice(1).map((v) => pad(v !== null && values[0] ? `${(v / values[0]).toFixed(2)}x` : "-", 24));
  lines.push([label.padEnd(36), ...cells, ...ratios].join("  "));
}
console.log(lines.join("\n"));
for (const r of results) if (r.slow) console.log(`${r.name}: slow clients ${JSON.stringify(r.slow)}`);

mkdirSync(`${root}load/results`, { recursive: true });
const out = `${root}load/results/compare-${new Date().toISOString().replace(/[:.]/g, "-")}.json`;
writeFileSync(out, JSON.stringify({ command: process.argv.slice(1), results: results.map((r) => ({ name: r.name, result: r.json })) }, null, 2));
console.log(`\nresults: ${out}`);
