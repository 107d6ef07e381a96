#!/usr/bin/env node
// What the hook seam costs on the fast path: the many-rooms fanout scenario
// (docs/benchmarks.md section 3) against servers started side by side, each on
// its own port and data directory, and measured back to back in one
// load/bench/compare.mjs invocation (with --rounds N, N times, each round in
// a rotated order so that no server always runs first or last):
//   - "before": the code before the seam, from another checkout (--before DIR,
//     built there with `npm run build`);
//   - "no hooks": this checkout's service, the plain Room;
//   - "beforePublish": a Room subclass whose beforePublish checks every
//     message's shape and publishes it as sent (load/bench/hooks/);
//   - "transform": the same hook returning the message with a field added.
// Every server runs with the accept gate off (workerd holds the sockets, as on
// Cloudflare); each is stopped at the end. After compare.mjs's table, a summary
// per server over the rounds: the median, lowest and highest deliveries per
// server CPU-second, and the median's ratio to the first server's (on a
// shared 2-core machine one run moves by several percent; the spread says how
// much a difference has to be to mean anything).
//
// Usage:
//   npm run build && node load/build.mjs
//   node load/bench/hook-seam.mjs [--before DIR] [--rounds 1] [--port 18641] [-- <fanout options>]
// Default fanout options: --rooms 200 --sockets 20 --rate 3 --duration 20 (600
// publishes/s, 12,000 deliveries/s: below what the machine holds, so the
// publisher keeps its schedule and the runs compare the same work).

import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { launcherIn } from "./local-server.mjs";

const root = fileURLToPath(new URL("../../", import.meta.url));
const argv = process.argv.slice(2);
const split = argv.indexOf("--");
const own = split < 0 ? argv : argv.slice(0, split);
const option = (name, fallback) => {
  const i = own.indexOf(`--${name}`);
  return i >= 0 ? own[i + 1] : fallback;
};
const before = option("before", null);
const rounds = Number(option("rounds", "1"));
const firstPort = Number(option("port", "18641"));
const scenario = split < 0 ? ["--rooms", "200", "--sockets", "20", "--rate", "3", "--duration", "20"] : argv.slice(split + 1);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const servers = [
  ...(before ? [{ name: "before", dir: before, args: [] }] : []),
  { name: "no hooks", dir: root, args: [] },
  { name: "beforePublish", dir: root, args: ["--config", join(root, "load/bench/hooks/wrangler.toml")] },
  { name: "transform", dir: root, args: ["--config", join(root, "load/bench/hooks/wrangler.toml"), "--var", "BENCH_HOOK=transform"] },
];

const children = [];
// No server outlives this script, whatever ends it.
process.on("exit", () => {
  for (const child of children) if (child.exitCode === null) child.kill("SIGTERM");
});
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => process.exit(130));

async function start(server, port) {
  const env = { ...process.env, PORT: String(port), ACCEPT_GATE: "off", DATA_DIR: mkdtempSync(join(tmpdir(), "hook-seam-")) };
  for (const key of ["PUBLISH_KEY", "TOKEN_SECRET"]) delete env[key];
  // The default worker was built by `npm run build` in its checkout; another config is bundled at start.
  const args = [launcherIn(server.dir), "--no-dev-vars", ...(server.args.length ? server.args : ["--no-build"])];
  const child = spawn(process.execPath, args, { cwd: server.dir, env, stdio: ["ignore", "pipe", "pipe"] });
  children.push(child);
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (out += d));
  const deadline = Date.now() + 60_000;
  while (!/workerd pid \d+/.test(out)) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`${server.name} did not start:\n${out}`);
    await sleep(100);
  }
  return `http://127.0.0.1:${port}`;
}

const variants = [];
for (const [i, server] of servers.entries()) {
  const url = await start(server, firstPort + i);
  console.error(`${server.name}: ${url} (${server.dir})`);
  for (let round = 0; round < rounds; round++) variants.push({ name: rounds > 1 ? `${server.name} #${round + 1}` : server.name, server: server.name, index: i, url, round });
}
// Round r starts with server r (mod the count): each server runs first, or last, as often as the others.
const count = servers.length;
variants.sort((a, b) => a.round - b.round || ((a.index - a.round + count * rounds) % count) - ((b.index - b.round + count * rounds) % count));
const args = [join(root, "load/bench/compare.mjs")];
for (const v of variants) args.push("--variant", `${v.name}::--url ${v.url}`);
args.push("--", "fanout", ...scenario);
console.error(`node ${args.map((a) => (a.includes(" ") ? JSON.stringify(a) : a)).join(" ")}`);
const run = spawnSync(process.execPath, args, { cwd: root, encoding: "utf8", maxBuffer: 64 * 1024 * 1024, stdio: ["ignore", "pipe", "inherit"] });
process.stdout.write(run.stdout ?? "");
process.exitCode = run.status ?? 1;
const saved = /^results: (.+)$/m.exec(run.stdout ?? "")?.[1];
if (run.status === 0 && saved) summarize(JSON.parse(readFileSync(saved, "utf8")));
// The servers' output pipes keep the event loop alive: exit, and the exit handler stops them.
process.exit();

/** Median, lowest and highest deliveries per server CPU-second of each server over its rounds. */
function summarize(compared) {
  const byServer = new Map(servers.map((s) => [s.name, []]));
  for (const { name, result } of compared.results) {
    const variant = variants.find((v) => v.name === name);
    const figure = result.runs?.[0]?.summary?.deliveriesPerServerCpuSecond;
    if (variant && typeof figure === "number") byServer.get(variant.server).push(figure);
  }
  const median = (xs) => {
    const sorted = [...xs].sort((a, b) => a - b);
    const mid = sorted.length >> 1;
    return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  };
  const first = median(byServer.get(servers[0].name) ?? []);
  const fmt = (x) => Math.round(x).toLocaleString("en-US");
  console.log(`\ndeliveries per server CPU-second over ${rounds} round(s):`);
  console.log(["server".padEnd(16), "median".padStart(8), "lowest".padStart(8), "highest".padStart(8), "spread".padStart(7), `median / ${servers[0].name}`.padStart(20), "  runs"].join("  "));
  for (const [name, figures] of byServer) {
    if (figures.length === 0) continue;
    const m = median(figures);
    const spread = `${(((Math.max(...figures) - Math.min(...figures)) / m) * 100).toFixed(1)}%`;
    console.log(
      [name.padEnd(16), fmt(m).padStart(8), fmt(Math.min(...figures)).padStart(8), fmt(Math.max(...figures)).padStart(8), spread.padStart(7), `${((m / first - 1) * 100).toFixed(1)}%`.padStart(20), `  ${figures.map(fmt).join(", ")}`].join("  "),
    );
  }
}
