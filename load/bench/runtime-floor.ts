import { spawn, type ChildProcess } from "node:child_process";
import { createRequire } from "node:module";
import { defineBench, log } from "../src/kit/bench";
import { compare, variantOf } from "./compare";
import { publishThroughput } from "./publish";

// Each target on a port of its own, so a server that is slow to go cannot hold up the next one.
const OURS = "ours::--spawn --port 18601 --server-gate off";
const BARE = "bare workerd::--baseline-only --baseline-bare --bare-port 18621";
const BARE_DURABLE = "bare workerd, durable::--baseline-only --baseline-bare-durable --bare-port 18621";
// Every room of a load run is named lt-<run>-...: this rule makes them all ephemeral (no spaces: a variant splits on them).
const OURS_EPHEMERAL = 'ours, ephemeral::--spawn --port 18603 --server-gate off --server-var HISTORY_RULES=[{"prefix":"lt-","store":false}]';
const PARTYSERVER = "PartyServer::--baseline-only --baseline-partyserver --partyserver-port 18631";
const NODE = "node ws::--baseline-only --baseline-port 18611";
const NODE_DURABLE = "node ws, durable::--baseline-only --baseline-durable --baseline-port 18612";

const SCENARIOS: Record<string, string[]> = {
  // 200 rooms × 20 sockets, 5 msg/s each: 1,000 publishes/s offered, 20,000 deliveries/s.
  "many-rooms": ["fanout", "--rooms", "200", "--sockets", "20", "--rate", "5", "--duration", "20"],
  // One room of 5,000, 40 msg/s with 16 publishes in flight: coalescing's table.
  "big-room": ["fanout", "--sockets", "5000", "--rate", "40", "--publishers", "16", "--duration", "20"],
  // 5,000 idle sockets in one room, opened in waves of 1,000 and held 10 s.
  idle: ["connect", "--sockets", "5000", "--wave", "1000", "--hold", "10"],
  // 5,000 upgrades into one room in one wave (256 in flight), while busy loops (SATURATE) take the cores.
  saturated: ["connect", "--sockets", "5000", "--wave", "5000", "--hold", "2"],
};
/** Tables whose publishes write: ephemeral rooms differ from durable ones there, so they get a column. */
const PUBLISHING = new Set(["many-rooms", "big-room"]);
/** Busy loops beside the "saturated" table: with the server and the clients, more work than the machine's 2 cores. */
const SATURATE = 2;
/** A busy loop stops by itself after this long, whatever happens to this process. */
const SATURATE_MAX_MS = 3 * 60 * 60 * 1000;

/** `count` processes that spin until killed (or SATURATE_MAX_MS). */
function busyLoops(count: number): ChildProcess[] {
  const loops = Array.from({ length: count }, () => spawn(process.execPath, ["-e", `const end = Date.now() + ${SATURATE_MAX_MS}; while (Date.now() < end) {}`], { stdio: "ignore" }));
  if (loops.length > 0) log(`${loops.length} busy loops running beside the table (pids ${loops.map((l) => l.pid).join(", ")})`);
  return loops;
}
const TABLES = [...Object.keys(SCENARIOS), "publish"];

function hasBetterSqlite(): boolean {
  try {
    createRequire(import.meta.url).resolve("better-sqlite3");
    return true;
  } catch {
    return false;
  }
}

export default defineBench({
  name: "runtime-floor",
  title: "the standard tables against the runtime's floor (bare workerd), PartyServer and the Node baseline",
  about: `The standard tables against the runtime's floor and a peer: each table is one compare invocation (the publish
benchmark for HTTP publishes with no subscribers) that runs ours (durable rooms, and where publishes are measured
ephemeral ones too: a HISTORY_RULES rule with "store": false for every room of the run), the bare workerd baseline
(send-only and durable), PartyServer (a room server written from its README) and the Node ws baseline (and its
durable variant when better-sqlite3 is installed) side by side in interleaved rounds. The saturated table opens
5,000 sockets at once while ${SATURATE} busy loops take the machine's cores. docs/benchmarks.md, "Against the runtime's floor", holds the figures. Build first:
npm run build && node load/build.mjs; run it under flock /tmp/bench.lock.

Tables: ${TABLES.join(", ")}, all. --before DIR adds a column: ours as another checkout (an earlier commit in a
worktree, built there) runs it. --print only prints the command a table runs.`,
  options: {
    table: { default: "all", help: `${TABLES.join(", ")} or all` },
    rounds: { default: "5", help: "interleaved rounds" },
    before: { help: "another checkout of the service, run as one more column" },
    print: { flag: true, help: "only print the commands" },
  },
  async run(args) {
    const table = args.text("table") ?? "all";
    const rounds = args.int("rounds", { min: 1, max: 20 });
    const before = args.text("before");
    const sqlite = hasBetterSqlite();
    if (!sqlite) log("better-sqlite3 is not installed: the durable Node baseline is left out (npm install --no-save better-sqlite3@12.11.1)");
    const names = table === "all" ? TABLES : [table];
    for (const name of names) if (!TABLES.includes(name)) throw new Error(`unknown table ${name}: one of ${TABLES.join(", ")}, all`);
    // The local server admits upgrades up to a quarter of its descriptor limit when workerd listens itself
    // (5,000 of 20,000 here): room for the 5,000 sockets of a table and the storage files beside them.
    process.env.CONNECTION_CEILING ??= "10000";
    for (const name of names) {
      const scenario = SCENARIOS[name];
      if (scenario === undefined) {
        const targets = ["ours", "bare", "bare-durable", "memory", ...(sqlite ? ["durable"] : [])];
        log(`\n### ${name}: npm run bench -- publish --rooms 1,100 --connections 50 --seconds 10 --targets ${targets.join(",")} --rounds ${rounds} --port 18701`);
        if (!args.flag("print")) await publishThroughput({ rooms: [1, 100], connections: 50, seconds: 10, targets, rounds, vars: {}, port: 18701 });
        continue;
      }
      const earlier = before === undefined ? [] : [`ours, before::--spawn --port 18602 --server-gate off --server-dir ${before}`];
      const ephemeral = PUBLISHING.has(name) ? [OURS_EPHEMERAL] : [];
      const variants = [OURS, ...ephemeral, ...earlier, BARE, BARE_DURABLE, PARTYSERVER, NODE, ...(sqlite ? [NODE_DURABLE] : [])];
      log(`\n### ${name}: npm run bench -- compare --rounds ${rounds} ${variants.map((v) => `--variant ${JSON.stringify(v)}`).join(" ")} -- ${scenario.join(" ")}`);
      if (args.flag("print")) continue;
      const loops = busyLoops(name === "saturated" ? SATURATE : 0);
      try {
        const { code } = await compare(variants.map(variantOf), scenario, rounds, ["--rounds", String(rounds), ...variants.flatMap((v) => ["--variant", v]), "--", ...scenario]);
        if (code !== 0) return code;
      } finally {
        for (const loop of loops) loop.kill("SIGKILL");
      }
    }
  },
});
