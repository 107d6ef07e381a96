#!/usr/bin/env node
// The standard tables against the runtime's floor and a peer: each table is
// one compare.mjs invocation (publish.mjs for HTTP publishes with no
// subscribers) that runs ours (durable rooms, and ephemeral ones: a
// HISTORY_RULES rule with "store": false for every room of the run), the bare
// workerd baseline (send-only and durable), PartyServer (a room server
// written from its README) and the Node `ws` baseline (and its durable variant
// when better-sqlite3 is installed) side by side in interleaved rounds.
// docs/benchmarks.md, "Against the runtime's floor", holds the figures and
// these commands.
//
//   npm run build && node load/build.mjs
//   flock /tmp/bench.lock node load/bench/runtime-floor.mjs --table many-rooms [--rounds 5] [--before DIR]
//
// Tables: many-rooms, big-room, idle (idle memory and CPU per handshake),
// saturated (5,000 upgrades at once while busy loops take the machine's
// cores: the handshakes that fail), publish. --print only prints the command
// a table runs.

import { spawn, spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../../", import.meta.url));
const argv = process.argv.slice(2);
const option = (name, fallback) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : fallback;
};
const table = option("table");
const rounds = option("rounds", "5");
const print = argv.includes("--print");
// --before DIR: one more column, ours as another checkout (an earlier commit in a worktree) runs it.
const before = option("before");

// Each target on a port of its own, so a server that is slow to go cannot hold up the next one.
const OURS = "ours::--spawn --port 18601 --server-gate off";
const BARE = "bare workerd::--baseline-only --baseline-bare --bare-port 18621";
const BARE_DURABLE = "bare workerd, durable::--baseline-only --baseline-bare-durable --bare-port 18621";
// Every room of a load run is named lt-<run>-...: this rule makes them all ephemeral (no spaces: compare.mjs splits on them).
const OURS_EPHEMERAL = 'ours, ephemeral::--spawn --port 18603 --server-gate off --server-var HISTORY_RULES=[{"prefix":"lt-","store":false}]';
const PARTYSERVER = "PartyServer::--baseline-only --baseline-partyserver --partyserver-port 18631";
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
  // 5,000 upgrades into one room in one wave (256 in flight), while busy loops (SATURATE) take the cores.
  saturated: ["connect", "--sockets", "5000", "--wave", "5000", "--hold", "2"],
};
/** Busy loops beside the "saturated" table: with the server and the clients, more work than the machine's 2 cores. */
const SATURATE = 2;
/** A busy loop stops by itself after this long, whatever happens to this script. */
const SATURATE_MAX_MS = 3 * 60 * 60 * 1000;

function commandOf(name) {
  if (name === "publish") {
    const targets = ["ours", "bare", "bare-durable", "memory", ...(hasBetterSqlite() ? ["durable"] : [])].join(",");
    return ["load/bench/publish.mjs", "--rooms", "1,100", "--connections", "50", "--seconds", "10", "--targets", targets, "--rounds", rounds, "--port", "18701"];
  }
  const scenario = SCENARIOS[name];
  if (!scenario) return undefined;
  const earlier = before === undefined ? [] : [`ours, before::--spawn --port 18602 --server-gate off --server-dir ${before}`];
  // Ephemeral rooms differ from durable ones in what a publish writes: the connect-only tables leave them out.
  const ephemeral = name === "many-rooms" || name === "big-room" ? [OURS_EPHEMERAL] : [];
  const variants = [OURS, ...ephemeral, ...earlier, BARE, BARE_DURABLE, PARTYSERVER, ...nodeVariants].flatMap((v) => ["--variant", v]);
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
  const burners = name === "saturated" ? Array.from({ length: SATURATE }, () => spawn(process.execPath, ["-e", `const end = Date.now() + ${SATURATE_MAX_MS}; while (Date.now() < end) {}`], { stdio: "ignore" })) : [];
  if (burners.length > 0) console.error(`${burners.length} busy loops running beside the table (pids ${burners.map((b) => b.pid).join(", ")})`);
  const run = spawnSync(process.execPath, args, { cwd: root, stdio: "inherit", env });
  for (const burner of burners) burner.kill("SIGKILL");
  if (run.status !== 0) process.exit(run.status ?? 1);
}
