#!/usr/bin/env node
// Multiplexed connections (GET /ws, hubs) against single-room sockets carrying
// the same subscriptions, side by side in one invocation: each table runs its
// variants in interleaved rounds (round r rotates their order by r), and
// prints the median of the rounds with the lowest-highest and the spread
// ((highest - lowest) / median) beneath, and ratios of medians against the
// first variant. docs/benchmarks.md, "Multiplexed connections", holds the
// figures and these commands.
//
//   npm run build && node load/build.mjs
//   flock /tmp/bench.lock node load/bench/multiplex.mjs --table fanout [--rounds 3] [--scale 0.75] [--rate 2]
//
// Tables:
//   fanout  R rooms × 50 followers, 2 msg/s per room: single-room sockets (R × 50), multiplexed connections
//           following 20 rooms each (R × 50 / 20) on the default 16 hubs, on 4, and on 1,024 (about one
//           connection per hub: a push per follower, as an object per connection would pay)
//   idle    idle memory: 1,000 multiplexed connections opened, then all subscribing to 20 of 400 rooms at once
//           (the subscribe storm), on 16 hubs and on 1,024, against single-room sockets, 50 per room
//   worker-held  the fanout table's shape on the bare workerd baseline: its rooms' own sockets against connections
//           the Worker holds itself, with an internal socket per room (load/baselines/bare-workerd/relay.ts)
//   storm   1,000 multiplexed connections × 20 of 400 rooms at 0.5 msg/s per room, every connection cut at once
//           after 5 s, reconnecting with full jitter and resuming each room with since/epoch
// --scale F multiplies the rooms of fanout and worker-held (and the single-room sockets of idle): 400 rooms × 50
// (20,000 sockets) are past a descriptor limit of 20,000 (workerd holds every single-room socket itself), so
// 0.75 (15,000 sockets) is the largest that both columns reach equally there; 0.25 is the default, what a
// 2-core machine publishes at 2 msg/s per room without the server's one thread saturating. --rate R sets the
// per-room rate of fanout and worker-held (default 2). --print only prints the commands.

import { spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../../", import.meta.url));
const argv = process.argv.slice(2);
const option = (name, fallback) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : fallback;
};
const table = option("table", "all");
const rounds = Number(option("rounds", "3"));
const scale = Number(option("scale", "0.25"));
const rate = Number(option("rate", "2"));
const print = argv.includes("--print");
if (!Number.isInteger(rounds) || rounds < 1 || rounds > 9) throw new Error("--rounds takes 1 to 9");
if (!(scale > 0 && scale <= 1)) throw new Error("--scale takes a number in (0, 1]");
if (!(rate > 0 && rate <= 50)) throw new Error("--rate takes a number in (0, 50]");

const rooms = Math.round(400 * scale);
const FOLLOWERS = 50;
const PER_CONNECTION = 20;
// Each variant on a port of its own, so a server that is slow to go cannot hold up the next one.
const spawnOn = (port) => ["--spawn", "--port", String(port), "--server-gate", "off"];
const client = ["--procs", "2", "--sources", "8"];

const TABLES = {
  fanout: {
    title: `${rooms} rooms × ${FOLLOWERS} followers, ${rate} msg/s per room, 20 s`,
    common: ["fanout", "--rooms", String(rooms), "--sockets", String(FOLLOWERS), "--rate", String(rate), "--duration", "20", ...client],
    variants: [
      { name: "single-room sockets", extra: spawnOn(18801) },
      { name: "multiplexed, 16 hubs", extra: [...spawnOn(18802), "--mux", String(PER_CONNECTION)] },
      { name: "multiplexed, 4 hubs", extra: [...spawnOn(18803), "--mux", String(PER_CONNECTION), "--server-var", "MULTIPLEX_HUBS=4"] },
      // About one connection per hub: a room's flush is a push per follower, what an object per connection would pay.
      { name: "multiplexed, 1,024 hubs", extra: [...spawnOn(18804), "--mux", String(PER_CONNECTION), "--server-var", "MULTIPLEX_HUBS=1024"] },
    ],
    metrics: [
      ["connected", "sockets connected", 0],
      ["subscriptions", "subscriptions (multiplexed)", 0],
      ["subscribeRefusals", "subscribes refused", 0],
      ["published", "messages published", 0],
      ["publishRate", "publish rate achieved (/s)", 1],
      ["publishFailures", "publishes failed", 0],
      ["expected", "deliveries expected", 0],
      ["delivered", "delivered in time", 0],
      ["deliveriesPerSecond", "deliveries/s", 0],
      ["serverCpuPerDeliveryUs", "server CPU per delivery (µs)", 1],
      ["deliveriesPerServerCpuSecond", "deliveries per server CPU-second", 0],
      ["latencyP50Ms", "latency p50 (ms)", 1],
      ["latencyP99Ms", "latency p99 (ms)", 0],
      ["allReachedP99Ms", "publish to every socket p99 (ms)", 0],
      ["publishHttpP99Ms", "publish HTTP p99 (ms)", 0],
      ["lost", "lost (late + never)", 0],
      ["duplicates", "duplicates", 0],
      ["outOfOrder", "out of order", 0],
      ["gaps", "seq gaps", 0],
      ["serverRssPeakBytes", "server RSS peak (MB)", 0, 1 / 1048576],
      ["serverCpuPercent", "server CPU (% of a core)", 0],
      ["clientCpuPercent", "client CPU (% of a core)", 0],
      ["busiestClientProcessPercent", "busiest client process (%)", 0],
      ["machineBusyPercent", "machine busy (%)", 0],
    ],
  },
  idle: {
    title: `idle: 1,000 multiplexed connections × ${PER_CONNECTION} of 400 rooms (subscribed all at once) against ${Math.round(20_000 * scale).toLocaleString("en-US")} single-room sockets, ${FOLLOWERS} per room`,
    common: ["connect", "--wave", "1000", "--hold", "10", ...client],
    variants: [
      { name: "single-room sockets", extra: [...spawnOn(18811), "--sockets", String(Math.round(20_000 * scale)), "--rooms", String(Math.round((20_000 * scale) / FOLLOWERS))] },
      { name: "multiplexed, 16 hubs", extra: [...spawnOn(18812), "--sockets", "1000", "--rooms", "400", "--mux", String(PER_CONNECTION)] },
      { name: "multiplexed, 1,024 hubs", extra: [...spawnOn(18813), "--sockets", "1000", "--rooms", "400", "--mux", String(PER_CONNECTION), "--server-var", "MULTIPLEX_HUBS=1024"] },
      { name: "Worker-held (bare workerd)", extra: ["--baseline-only", "--baseline-bare", "--bare-port", "18814", "--sockets", "1000", "--rooms", "400", "--mux", String(PER_CONNECTION)] },
    ],
    metrics: [
      ["connected", "connections", 0],
      ["subscriptions", "subscriptions", 0],
      ["handshakesPerSecond", "handshakes/s", 0],
      ["idleMemoryPerConnectionBytes", "server RSS per connection (KB)", 1, 1 / 1024],
      ["idleMemoryPerSubscriptionBytes", "server RSS per subscription (KB)", 1, 1 / 1024],
      ["kernelTcpMemoryPerConnectionBytes", "kernel TCP memory per connection (KB)", 1, 1 / 1024],
      ["allSubscribedMs", "subscribe storm: all subscribed (ms)", 0],
      ["subscribeP99Ms", "one connection's 20 rooms, p99 (ms)", 0],
      ["subscribeRefusals", "subscribes refused", 0],
      ["serverRssPeakBytes", "server RSS peak (MB)", 0, 1 / 1048576],
    ],
    details: (run) => ({ storm: run.details?.subscribeStorm, errors: run.details?.closesByCode }),
  },
  // The runtime's floor (load/baselines/bare-workerd): its rooms' own sockets, and the same rooms followed through
  // connections the Worker holds itself with an internal socket per room (relay.ts).
  "worker-held": {
    title: `the runtime's floor: ${rooms} rooms × ${FOLLOWERS} followers, ${rate} msg/s per room, 20 s, bare workerd rooms`,
    common: ["fanout", "--rooms", String(rooms), "--sockets", String(FOLLOWERS), "--rate", String(rate), "--duration", "20", ...client, "--baseline-only", "--baseline-bare"],
    variants: [
      { name: "bare, single-room sockets", extra: ["--bare-port", "18831"] },
      { name: "bare, Worker-held", extra: ["--bare-port", "18833", "--mux", String(PER_CONNECTION)] },
    ],
    metrics: [],
  },
  // At full size (1,000 connections × 20 of 400 rooms), at 0.5 msg/s per room: 200 publishes and
  // 10,000 deliveries a second, what this machine carries beside 20,000 resumes at once.
  storm: {
    title: "reconnect storm: 1,000 multiplexed connections × 20 of 400 rooms (50 followers each), 0.5 msg/s per room, every connection cut at 5 s",
    common: ["storm", "--rooms", "400", "--sockets", String(FOLLOWERS), "--mux", String(PER_CONNECTION), "--rate", "0.5", "--duration", "25", "--drop-at", "5", ...client],
    variants: [{ name: "multiplexed, 16 hubs", extra: spawnOn(18822) }],
    metrics: [
      ["connected", "sockets connected", 0],
      ["subscriptions", "subscriptions (multiplexed)", 0],
      ["allBackMs", "time until all are back (ms)", 0],
      ["downtimeP50Ms", "per-client downtime p50 (ms)", 0],
      ["downtimeP99Ms", "per-client downtime p99 (ms)", 0],
      ["notBack", "not back", 0],
      ["reconnectAttempts", "reconnect attempts", 0],
      ["reconnectFailures", "reconnect attempts failed", 0],
      ["subscribeRefusals", "subscribes refused", 0],
      ["expected", "deliveries expected", 0],
      ["lost", "lost (late + never)", 0],
      ["duplicates", "duplicates", 0],
      ["outOfOrder", "out of order", 0],
      ["lostEventSeqs", "seqs declared lost by the server", 0],
      ["latencyP99Ms", "latency p99 (ms)", 0],
      ["machineBusyPercent", "machine busy (%)", 0],
    ],
  },
};

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

const WIDTH = 22;
const pad = (text) => String(text).padStart(WIDTH);
const format = (value, digits) => value.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: 0 });

function runTable(name) {
  const spec = TABLES[name];
  const columns = spec.variants.map((v) => ({ ...v, rounds: [] }));
  for (let round = 0; round < rounds; round++) {
    for (let k = 0; k < columns.length; k++) {
      const column = columns[(k + round) % columns.length];
      const args = [`${root}load/dist/cli.js`, ...spec.common, ...column.extra, "--json", "--quiet", "--no-report"];
      console.error(`\n== ${name}, round ${round + 1}/${rounds}, ${column.name}: node ${args.slice(1).join(" ")}`);
      if (print) continue;
      // Up to 10,000 sockets on workerd listening itself: room for them below the descriptor limit.
      const env = { ...process.env, CONNECTION_CEILING: process.env.CONNECTION_CEILING ?? "15000" };
      const run = spawnSync(process.execPath, args, { cwd: root, encoding: "utf8", env, maxBuffer: 512 * 1024 * 1024, stdio: ["ignore", "pipe", "inherit"] });
      const json = run.stdout.includes("{") ? JSON.parse(run.stdout.slice(run.stdout.indexOf("{"))) : undefined;
      const target = json?.runs?.[0];
      if (!target?.ok) console.error(`${column.name}: FAILED (${target?.error ?? `exit ${run.status}`})`);
      const failures = target?.details?.connectFailuresByCause;
      column.rounds.push({
        round: round + 1,
        summary: target?.summary ?? {},
        notes: target?.notes ?? [],
        closes: target?.details?.closesByCode,
        failures: failures && Object.keys(failures).length ? failures : undefined,
        extra: spec.details?.(target ?? {}),
      });
    }
  }
  if (print) return undefined;
  const lines = [`### ${name}: ${spec.title}`, rounds > 1 ? `median of ${rounds} interleaved rounds; beneath: lowest-highest (spread)` : "one round"];
  lines.push(["metric".padEnd(40), ...columns.map((c) => pad(c.name)), ...columns.slice(1).map((c) => pad(`÷ ${columns[0].name}`))].join("  "));
  for (const [key, label, digits, factor = 1] of spec.metrics) {
    const per = columns.map((c) => c.rounds.map((r) => r.summary[key]).filter((v) => typeof v === "number").map((v) => v * factor));
    if (per.every((v) => v.length === 0)) continue;
    const medians = per.map((v) => (v.length ? median(v) : null));
    lines.push(
      [
        label.padEnd(40),
        ...medians.map((m) => pad(m === null ? "-" : format(m, digits))),
        ...medians.slice(1).map((m) => pad(m !== null && medians[0] ? `${(m / medians[0]).toFixed(2)}x` : "-")),
      ].join("  "),
    );
    if (rounds > 1) {
      lines.push(
        [
          "".padEnd(40),
          ...per.map((v, i) => {
            if (v.length < 2) return pad("");
            const lo = Math.min(...v);
            const hi = Math.max(...v);
            return pad(`${format(lo, digits)}-${format(hi, digits)}${medians[i] ? ` (${(((hi - lo) / Math.abs(medians[i])) * 100).toFixed(0)}%)` : ""}`);
          }),
        ].join("  "),
      );
    }
  }
  for (const c of columns) {
    for (const note of new Set(c.rounds.flatMap((r) => r.notes))) lines.push(`${c.name}: ${note}`);
    for (const r of c.rounds) {
      if (r.closes && Object.keys(r.closes).length) lines.push(`${c.name}, round ${r.round}: closes by code ${JSON.stringify(r.closes)}`);
      if (r.failures) lines.push(`${c.name}, round ${r.round}: connection failures by cause ${JSON.stringify(r.failures)}`);
      if (r.extra) lines.push(`${c.name}, round ${r.round}: ${JSON.stringify(r.extra)}`);
    }
  }
  console.log(`${lines.join("\n")}\n`);
  return { name, title: spec.title, common: spec.common, columns: columns.map((c) => ({ name: c.name, extra: c.extra, rounds: c.rounds })) };
}

TABLES["worker-held"].metrics = TABLES.fanout.metrics;
const names = table === "all" ? Object.keys(TABLES) : [table];
for (const name of names) if (!TABLES[name]) throw new Error(`unknown table ${name}: one of ${Object.keys(TABLES).join(", ")}, all`);
const results = names.map(runTable).filter(Boolean);
if (!print) {
  mkdirSync(`${root}load/results`, { recursive: true });
  const out = `${root}load/results/multiplex-${new Date().toISOString().replace(/[:.]/g, "-")}.json`;
  writeFileSync(out, JSON.stringify({ bench: "multiplex", command: process.argv.slice(1), rounds, scale, rate, tables: results }, null, 2));
  console.log(`results: ${out}`);
}
