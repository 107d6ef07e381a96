import { defineBench, log } from "../src/kit/bench";
import { httpLoad, jsonPost } from "../src/kit/http-load";
import { cpuMs } from "../src/kit/proc";
import { rotation } from "../src/kit/rounds";
import { Server } from "../src/kit/server";
import { sleep } from "../src/kit/time";
import { formatSpread, spreadOf } from "../src/stats/percentile";
import { readPairs } from "../src/kit/args";

/** The names --targets takes: ours, and the Node baseline in memory or durable, and the bare workerd baselines. */
const KINDS: Record<string, string> = { ours: "ours", memory: "baseline", durable: "baseline-durable", bare: "bare", "bare-durable": "bare-durable" };

export interface PublishOptions {
  rooms: number[];
  connections: number;
  seconds: number;
  targets: string[];
  rounds: number;
  vars: Record<string, string>;
  port: number;
}

/** Runs every (target, rooms) pair `rounds` times, interleaved; prints a JSON line per run and the table on stderr. */
export async function publishThroughput(o: PublishOptions): Promise<void> {
  for (const target of o.targets) if (!KINDS[target]) throw new Error(`unknown target ${target}: one of ${Object.keys(KINDS).join(", ")}`);
  const pairs = o.targets.flatMap((target) => o.rooms.map((rooms) => ({ target, rooms })));
  const results: Array<{ target: string; rooms: number; publishesPerSecond: number; latencyMs: { p50: number; p99: number }; serverCpuPerPublishUs: number | null; serverCpuUncertaintyUs: number | null; serverCorePercent: number; failed: number }> = [];
  for (let round = 0; round < o.rounds; round++) {
    // Whole targets rotate, so a target's room counts stay next to each other.
    for (const { target, rooms } of rotation(pairs, round, o.rooms.length)) {
      const server = await Server.start({ kind: KINDS[target] as string, port: o.port, ...(target === "ours" ? { vars: o.vars } : {}) });
      // Requests cycle through the rooms.
      const requests = Array.from({ length: rooms }, (_, i) => jsonPost(`/rooms/bench-${i}/publish`, `{"n":${i}}`));
      // Warm-up: every room exists and the code paths are compiled.
      await httpLoad(server.url, o.connections, 2, requests);
      await sleep(500);
      const cpu0 = cpuMs(server.pid);
      const t0 = performance.now();
      const r = await httpLoad(server.url, o.connections, o.seconds, requests);
      const wallMs = performance.now() - t0;
      const cpu = cpuMs(server.pid) - cpu0;
      const run = {
        round: round + 1,
        target,
        rooms,
        connections: o.connections,
        generator: "autocannon",
        publishes: r.ok,
        non2xx: r.non2xx,
        errors: r.errors,
        failed: r.non2xx + r.errors,
        publishesPerSecond: Math.round(r.ok / (wallMs / 1000)),
        latencyMs: r.latencyMs,
        serverCpuPerPublishUs: r.ok ? Math.round((cpu * 1000) / r.ok) : null,
        // CPU time is counted in 10 ms ticks: the per-publish figure carries that much over the whole run.
        serverCpuUncertaintyUs: r.ok ? Math.round((2 * 10 * 1000) / r.ok) : null,
        serverCorePercent: Math.round((cpu / wallMs) * 100),
      };
      results.push(run);
      console.log(JSON.stringify(run));
      await server.stop();
      await sleep(1000);
    }
  }
  const cell = (values: number[]): string => formatSpread(spreadOf(values));
  const rows = pairs.map(({ target, rooms }) => {
    const runs = results.filter((r) => r.target === target && r.rooms === rooms);
    return [
      target,
      String(rooms),
      cell(runs.map((r) => r.publishesPerSecond)),
      cell(runs.map((r) => r.latencyMs.p50)),
      cell(runs.map((r) => r.latencyMs.p99)),
      `${cell(runs.map((r) => r.serverCpuPerPublishUs ?? Number.NaN))} ± ${Math.max(...runs.map((r) => r.serverCpuUncertaintyUs ?? 0))} µs`,
      cell(runs.map((r) => r.serverCorePercent)),
      String(runs.reduce((sum, r) => sum + r.failed, 0)),
    ];
  });
  const header = ["target", "rooms", "publishes/s", "p50 ms", "p99 ms", "server CPU/publish", "server % of a core", "failed"];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => (row[i] as string).length)));
  log(
    [`${o.rounds > 1 ? `median of ${o.rounds} interleaved rounds (lowest-highest, spread)` : "one round"}; generator autocannon, ${o.connections} connections, ${o.seconds} s`]
      .concat([header, ...rows].map((row) => row.map((c, i) => (i < 2 ? c.padEnd(widths[i] as number) : c.padStart(widths[i] as number))).join("  ")))
      .join("\n"),
  );
}

export default defineBench({
  name: "publish",
  title: "HTTP publish throughput with no subscribers, ours against the baselines",
  about: `HTTP publishes with no subscribers, by an independent load generator (autocannon, N keep-alive connections,
a 2 s warm-up, then --seconds), against the local server, the Node ws baseline (in memory: memory; durable:
durable, needs better-sqlite3) and the bare workerd baseline (bare, bare-durable), each started fresh on --port
and stopped at the end. Server CPU is utime+stime of the process holding the listening socket (workerd, or node
for the Node baselines) from /proc; its ± is two 10 ms ticks over the publishes. With --rounds N every (target,
rooms) pair runs N times, interleaved (round r rotates the targets by r). Prints a JSON line per run and the
table on stderr. Build first: npm run build. The local server's accept gate is the launcher's choice (ACCEPT_GATE).`,
  options: {
    rooms: { default: "1,100", help: "room counts, each a run: publishes cycle through the rooms" },
    connections: { default: "50", help: "keep-alive connections" },
    seconds: { default: "10", help: "seconds measured per run" },
    targets: { default: "ours,durable,memory", help: "of ours, memory, durable, bare, bare-durable" },
    rounds: { default: "1", help: "interleaved rounds" },
    var: { multiple: true, help: "KEY=VALUE var for our server (repeat)" },
    port: { default: "18701", help: "port of each server in turn" },
  },
  run: (args) =>
    publishThroughput({
      rooms: args.numbers("rooms", { min: 1, integer: true }),
      connections: args.int("connections", { min: 1 }),
      seconds: args.number("seconds", { min: 1 }),
      targets: args.list("targets"),
      rounds: args.int("rounds", { min: 1 }),
      vars: readPairs(args.texts("var"), "=", "var"),
      port: args.int("port", { min: 1, max: 65535 }),
    }),
});
