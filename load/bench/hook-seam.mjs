#!/usr/bin/env node
// What the hook seam costs on the fast path: the many-rooms fanout scenario
// (docs/benchmarks.md section 3) against servers started side by side, each on
// its own port and data directory, and measured back to back in one
// load/bench/compare.mjs invocation (then again, in the same order, with
// --rounds 2):
//   - "before": the code before the seam, from another checkout (--before DIR,
//     built there with `npm run build`);
//   - "no hooks": this checkout's service, the plain Room;
//   - "beforePublish": a Room subclass whose beforePublish checks every
//     message's shape and publishes it as sent (load/bench/hooks/);
//   - "transform": the same hook returning the message with a field added.
// Every server runs with the accept gate off (workerd holds the sockets, as on
// Cloudflare); each is stopped at the end.
//
// Usage:
//   npm run build && node load/build.mjs
//   node load/bench/hook-seam.mjs [--before DIR] [--rounds 1] [--port 18641] [-- <fanout options>]
// Default fanout options: --rooms 200 --sockets 20 --rate 5 --duration 20.

import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

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
const scenario = split < 0 ? ["--rooms", "200", "--sockets", "20", "--rate", "5", "--duration", "20"] : argv.slice(split + 1);
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
  const args = [join(server.dir, "worker/local/server.mjs"), "--no-dev-vars", ...(server.args.length ? server.args : ["--no-build"])];
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
  for (let round = 0; round < rounds; round++) variants.push({ name: rounds > 1 ? `${server.name} #${round + 1}` : server.name, url, round });
}
variants.sort((a, b) => a.round - b.round);
const args = [join(root, "load/bench/compare.mjs")];
for (const v of variants) args.push("--variant", `${v.name}::--url ${v.url}`);
args.push("--", "fanout", ...scenario);
console.error(`node ${args.map((a) => (a.includes(" ") ? JSON.stringify(a) : a)).join(" ")}`);
const run = spawnSync(process.execPath, args, { cwd: root, stdio: "inherit" });
process.exitCode = run.status ?? 1;
