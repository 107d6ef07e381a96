#!/usr/bin/env node
// HTTP publish throughput with no subscribers, measured with an independent load generator
// (autocannon, or http-load.mjs when it is not installed) against the local server, the Node `ws`
// baseline (in-memory and durable) and the bare workerd baseline (send-only and durable), each
// started fresh on its own port and stopped at the end. Server CPU is utime+stime of the process
// holding the listening socket (workerd, or node for the Node baselines), from /proc (Linux only).
//
// Usage:
//   npm install --no-save better-sqlite3@12.11.1 autocannon@8.0.0   # optional benchmark-only tools
//   npm run build && node load/build.mjs
//   node load/bench/publish.mjs [--rooms 1,100] [--connections 50] [--seconds 10]
//        [--targets ours,durable,memory,bare,bare-durable] [--rounds 1] [--var KEY=VALUE ...] [--port 18701]
//
// With --rounds N every (target, rooms) pair runs N times, interleaved (round r rotates the order of
// the targets by r), and the table gives each pair's median with the lowest and highest and the spread.
// Prints one JSON line per run and a table on stderr. Bounded by --seconds per run.

import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { runHttpLoad } from "./http-load.mjs";

const require = createRequire(import.meta.url);
const argv = process.argv.slice(2);
const option = (name, fallback) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : fallback;
};
const vars = argv.flatMap((a, i) => (a === "--var" ? [argv[i + 1]] : []));
const ROOMS = option("rooms", "1,100").split(",").map(Number);
const CONNECTIONS = Number(option("connections", "50"));
const SECONDS = Number(option("seconds", "10"));
const TARGETS = option("targets", "ours,durable,memory").split(",");
const ROUNDS = Number(option("rounds", "1"));
const PORT = Number(option("port", "18701"));
const CLK_TCK = 100;
const root = fileURLToPath(new URL("../../", import.meta.url));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const running = new Set();
process.on("exit", () => running.forEach((child) => child.kill("SIGTERM")));

let autocannon;
try {
  autocannon = require("autocannon");
} catch {
  console.error("autocannon is not installed (npm install --no-save autocannon@8.0.0): publishing with load/bench/http-load.mjs");
}
const GENERATOR = autocannon ? "autocannon" : "http-load.mjs";

function cpuMs(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(f[11]) + Number(f[12])) * 1000) / CLK_TCK;
}

async function up(url) {
  try {
    return (await fetch(`${url}/healthz`)).ok;
  } catch {
    return false;
  }
}

async function start(target) {
  const dir = mkdtempSync(join(tmpdir(), `publish-bench-${target}-`));
  const url = `http://127.0.0.1:${PORT}`;
  const bare = target === "bare" || target === "bare-durable";
  const args =
    target === "ours"
      ? [join(root, "local-server/server.mjs"), "--no-build", "--no-dev-vars", ...vars.flatMap((v) => ["--var", v])]
      : bare
        ? [join(root, "load/dist/bare-server.js"), "--port", String(PORT), "--data", join(dir, "data"), ...(target === "bare-durable" ? ["--durable"] : [])]
        : [join(root, "load/dist/baseline-server.js"), "--port", String(PORT), ...(target === "durable" ? ["--durable", join(dir, "history.sqlite")] : [])];
  const child = spawn(process.execPath, args, { env: { ...process.env, PORT: String(PORT), DATA_DIR: join(dir, "data") }, stdio: ["ignore", "pipe", "pipe"] });
  // The server must not outlive this script, whatever ends it (one listener for all of them).
  running.add(child);
  child.once("exit", () => running.delete(child));
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (out += d));
  const deadline = Date.now() + 60_000;
  // Ours and the bare baseline are ready once their banner (with workerd's pid) is out; a Node baseline once it answers.
  const onWorkerd = target === "ours" || bare;
  while (!(onWorkerd ? /workerd pid \d+/.test(out) && (await up(url)) : await up(url))) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`${target} did not start:\n${out}`);
    await sleep(100);
  }
  const pid = onWorkerd ? Number(/workerd pid (\d+)/.exec(out)?.[1]) : child.pid;
  return {
    url,
    pid,
    stop: async () => {
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGTERM");
      await Promise.race([exited, sleep(10_000)]);
      if (child.exitCode === null) child.kill("SIGKILL");
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // gone
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function runCannon(url, rooms, seconds) {
  // Requests cycle through the rooms; each connection starts at a different one.
  const requests = Array.from({ length: rooms }, (_, i) => ({ method: "POST", path: `/rooms/bench-${i}/publish`, body: `{"n":${i}}`, headers: { "content-type": "application/json" } }));
  if (!autocannon) return runHttpLoad({ url, connections: CONNECTIONS, duration: seconds, seconds, requests });
  return new Promise((resolve, reject) => {
    autocannon({ url, connections: CONNECTIONS, duration: seconds, requests, pipelining: 1 }, (error, result) => (error ? reject(error) : resolve(result)));
  });
}

const results = [];
const pairs = TARGETS.flatMap((target) => ROOMS.map((rooms) => ({ target, rooms })));
for (let round = 0; round < ROUNDS; round++) {
  for (let k = 0; k < pairs.length; k++) {
    // Whole targets rotate, so a target's two room counts stay next to each other.
    const { target, rooms } = pairs[(k + round * ROOMS.length) % pairs.length];
    const server = await start(target);
    // Warm-up: every room exists and the code paths are compiled.
    await runCannon(server.url, rooms, 2);
    await sleep(500);
    const cpu0 = cpuMs(server.pid);
    const t0 = performance.now();
    const r = await runCannon(server.url, rooms, SECONDS);
    const wallMs = performance.now() - t0;
    const cpu1 = cpuMs(server.pid);
    const ok = r.requests.total - r.non2xx - r.errors;
    const cpu = cpu1 - cpu0;
    results.push({
      round: round + 1,
      target,
      rooms,
      connections: CONNECTIONS,
      generator: GENERATOR,
      publishes: ok,
      non2xx: r.non2xx,
      errors: r.errors,
      ...(r.errorCauses && Object.keys(r.errorCauses).length ? { errorCauses: r.errorCauses } : {}),
      publishesPerSecond: Math.round(ok / (wallMs / 1000)),
      latencyMs: { p50: r.latency.p50, p99: r.latency.p99, max: r.latency.max },
      serverCpuPerPublishUs: ok ? Math.round((cpu * 1000) / ok) : null,
      // CPU time is counted in 10 ms ticks: the per-publish figure carries that much over the whole run.
      serverCpuUncertaintyUs: ok ? Math.round((2 * 10 * 1000) / ok) : null,
      serverCorePercent: Math.round((cpu / wallMs) * 100),
    });
    console.log(JSON.stringify(results.at(-1)));
    await server.stop();
    await sleep(1000);
  }
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}
const cell = (runs, pick, digits = 0) => {
  const values = runs.map(pick);
  const m = median(values);
  if (values.length < 2) return m.toFixed(digits);
  const lo = Math.min(...values);
  const hi = Math.max(...values);
  return `${m.toFixed(digits)} (${lo.toFixed(digits)}-${hi.toFixed(digits)}, ${m ? (((hi - lo) / m) * 100).toFixed(1) : "-"}%)`;
};
const rows = pairs.map(({ target, rooms }) => {
  const runs = results.filter((r) => r.target === target && r.rooms === rooms);
  return [
    target,
    String(rooms),
    cell(runs, (r) => r.publishesPerSecond),
    cell(runs, (r) => r.latencyMs.p50),
    cell(runs, (r) => r.latencyMs.p99),
    `${cell(runs, (r) => r.serverCpuPerPublishUs)} ± ${Math.max(...runs.map((r) => r.serverCpuUncertaintyUs))} µs`,
    cell(runs, (r) => r.serverCorePercent),
    String(runs.reduce((sum, r) => sum + r.non2xx + r.errors, 0)),
  ];
});
const header = ["target", "rooms", "publishes/s", "p50 ms", "p99 ms", "server CPU/publish", "server % of a core", "failed"];
const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i].length)));
console.error(
  [`${ROUNDS > 1 ? `median of ${ROUNDS} interleaved rounds (lowest-highest, spread)` : "one round"}; generator ${GENERATOR}, ${CONNECTIONS} connections, ${SECONDS} s`]
    .concat([header, ...rows].map((row) => row.map((c, i) => (i < 2 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join("  ")))
    .join("\n"),
);
