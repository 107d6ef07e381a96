#!/usr/bin/env node
// The standard tables against the runtime's floor: each table is one
// compare.mjs invocation (publish.mjs for HTTP publishes with no subscribers)
// that runs ours, the bare workerd baseline (send-only and durable) and the
// Node `ws` baseline (and its durable variant when better-sqlite3 is
// installed) side by side in interleaved rounds. docs/benchmarks.md,
// "Against the runtime's floor", holds the figures and these commands.
//
//   npm run build && node load/build.mjs
//   flock /tmp/bench.lock node load/bench/runtime-floor.mjs --table many-rooms [--rounds 3] [--before DIR]
//
// Tables: many-rooms, big-room, idle (idle memory and CPU per handshake), publish.
// --print only prints the command a table runs.

import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../../", import.meta.url));
const argv = process.argv.slice(2);
const option = (name, fallback) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : fallback;
};
const table = option("table");
const rounds = option("rounds", "3");
const print = argv.includes("--print");
// --before DIR: one more column, ours as another checkout (an earlier commit in a worktree) runs it.
const before = option("before");

// Each target on a port of its own, so a server that is slow to go cannot hold up the next one.
const OURS = "ours::--spawn --port 18601 --server-gate off";
const BARE = "bare workerd::--baseline-only --baseline-bare --bare-port 18621";
const BARE_DURABLE = "bare workerd, durable::--baseline-only --baseline-bare-durable --bare-port 18621";
const NODE = "node ws::--baseline-only --baseline-port 18611";
const NODE_DURABLE = "node ws, durable::--baseline-only --baseline-durable --baseline-port 18612";

function hasBetterSqlite() {
  try {
    createRequire(import.meta.url).resolve("better-sqlite3");
    return true;
  } catch {
    return false;
  }
}
const nodeVariants = hasBetterSqlite() ? [NODE, NODE_DURABLE] : [NODE];
if (!hasBetterSqlite()) console.error("better-sqlite3 is not installed: the durable Node baseline is left out (npm install --no-save better-sqlite3@12.11.1)");

const SCENARIOS = {
  // 200 rooms × 20 sockets, 5 msg/s each: 1,000 publishes/s offered, 20,000 deliveries/s.
  "many-rooms": ["fanout", "--rooms", "200", "--sockets", "20", "--rate", "5", "--duration", "20"],
  // One room of 5,000, 40 msg/s with 16 publishes in flight: coalescing's table.
  "big-room": ["fanout", "--sockets", "5000", "--rate", "40", "--publishers", "16", "--duration", "20"],
  // 5,000 idle sockets in one room, opened in waves of 1,000 and held 10 s.
  idle: ["connect", "--sockets", "5000", "--wave", "1000", "--hold", "10"],
};

function commandOf(name) {
  if (name === "publish") {
    const targets = ["ours", "bare", "bare-durable", "memory", ...(hasBetterSqlite() ? ["durable"] : [])].join(",");
    return ["load/bench/publish.mjs", "--rooms", "1,100", "--connections", "50", "--seconds", "10", "--targets", targets, "--rounds", rounds, "--port", "18701"];
  }
  const scenario = SCENARIOS[name];
  if (!scenario) return undefined;
  const earlier = before === undefined ? [] : [`ours, before::--spawn --port 18602 --server-gate off --server-dir ${before}`];
  const variants = [OURS, ...earlier, BARE, BARE_DURABLE, ...nodeVariants].flatMap((v) => ["--variant", v]);
  return ["load/bench/compare.mjs", "--rounds", rounds, ...variants, "--", ...scenario];
}

const names = table === undefined || table === "all" ? [...Object.keys(SCENARIOS), "publish"] : [table];
for (const name of names) {
  const args = commandOf(name);
  if (!args) {
    console.error(`unknown table ${name}: one of ${[...Object.keys(SCENARIOS), "publish"].join(", ")}, all`);
    process.exit(2);
  }
  console.error(`\n### ${name}: node ${args.map((a) => (/\s/.test(a) ? JSON.stringify(a) : a)).join(" ")}`);
  if (print) continue;
  // The local server admits upgrades up to a quarter of its descriptor limit when workerd listens itself
  // (5,000 of 20,000 here): room for the 5,000 sockets of a table and the storage files beside them.
  const env = { ...process.env, CONNECTION_CEILING: process.env.CONNECTION_CEILING ?? "10000" };
  const run = spawnSync(process.execPath, args, { cwd: root, stdio: "inherit", env });
  if (run.status !== 0) process.exit(run.status ?? 1);
}
