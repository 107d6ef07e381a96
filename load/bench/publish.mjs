#!/usr/bin/env node
// HTTP publish throughput with no subscribers, measured with an independent load generator
// (autocannon) against the local server and the Node `ws` baseline (in-memory and durable), each
// started fresh on its own port and stopped at the end. Server CPU is utime+stime of the process
// holding the listening socket (workerd, or node for the baselines), from /proc (Linux only).
//
// Usage:
//   npm install --no-save better-sqlite3@12.11.1 autocannon@8.0.0   # benchmark-only tools
//   npm run build && node load/build.mjs
//   node load/bench/publish.mjs [--rooms 1,100] [--connections 50] [--seconds 10] [--targets ours,durable,memory]
//        [--var KEY=VALUE ...] [--port 18701]
//
// Prints one JSON line per (target, rooms) pair and a table on stderr. Bounded by --seconds per run.

import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

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
const PORT = Number(option("port", "18701"));
const CLK_TCK = 100;
const root = fileURLToPath(new URL("../../", import.meta.url));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let autocannon;
try {
  autocannon = require("autocannon");
} catch {
  console.error("this benchmark needs autocannon: npm install --no-save better-sqlite3@12.11.1 autocannon@8.0.0");
  process.exit(2);
}

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
  const args =
    target === "ours"
      ? [join(root, "local-server/server.mjs"), "--no-build", "--no-dev-vars", ...vars.flatMap((v) => ["--var", v])]
      : [join(root, "load/dist/baseline-server.js"), "--port", String(PORT), ...(target === "durable" ? ["--durable", join(dir, "history.sqlite")] : [])];
  const child = spawn(process.execPath, args, { env: { ...process.env, PORT: String(PORT), DATA_DIR: join(dir, "data") }, stdio: ["ignore", "pipe", "pipe"] });
  // The server must not outlive this script, whatever ends it.
  process.on("exit", () => child.kill("SIGTERM"));
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (out += d));
  const deadline = Date.now() + 60_000;
  // Ours is ready once its banner (with workerd's pid) is out; a baseline once it answers.
  while (!(target === "ours" ? /workerd pid \d+/.test(out) && (await up(url)) : await up(url))) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`${target} did not start:\n${out}`);
    await sleep(100);
  }
  const pid = target === "ours" ? Number(/workerd pid (\d+)/.exec(out)?.[1]) : child.pid;
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
  return new Promise((resolve, reject) => {
    autocannon({ url, connections: CONNECTIONS, duration: seconds, requests, pipelining: 1 }, (error, result) => (error ? reject(error) : resolve(result)));
  });
}

const results = [];
for (const target of TARGETS) {
  for (const rooms of ROOMS) {
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
      target,
      rooms,
      connections: CONNECTIONS,
      publishes: ok,
      non2xx: r.non2xx,
      errors: r.errors,
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
console.error(
  ["target   rooms  publishes/s  p50 ms  p99 ms  server CPU/publish  server % of a core"]
    .concat(results.map((r) => `${r.target.padEnd(8)} ${String(r.rooms).padStart(5)}  ${String(r.publishesPerSecond).padStart(11)}  ${String(r.latencyMs.p50).padStart(6)}  ${String(r.latencyMs.p99).padStart(6)}  ${`${r.serverCpuPerPublishUs} ± ${r.serverCpuUncertaintyUs} µs`.padStart(18)}  ${String(r.serverCorePercent).padStart(18)}`))
    .join("\n"),
);
