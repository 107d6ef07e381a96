import { defineBench, log } from "../src/kit/bench";
import { columnNotes, runVariants, type Variant } from "../src/kit/load-runs";
import { resultHeader, writeResult } from "../src/kit/results";
import { medianTable, type MetricRow } from "../src/kit/rounds";
import type { MultiplexResult } from "../src/result";

const FOLLOWERS = 50;
const PER_CONNECTION = "20";
const client = ["--procs", "2", "--sources", "8"];
// Each variant on a port of its own, so a server that is slow to go cannot hold up the next one.
const spawnOn = (port: number): string[] => ["--spawn", "--port", String(port), "--server-gate", "off"];
const mux = (...extra: string[]): string[] => ["--mux", PER_CONNECTION, ...extra];

const FANOUT_METRICS: MetricRow[] = [
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
];

const IDLE_METRICS: MetricRow[] = [
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
];

interface Table {
  title: string;
  common: string[];
  variants: Variant[];
  metrics: MetricRow[];
}

function tables(scale: number, rate: number): Record<string, Table> {
  const rooms = String(Math.round(400 * scale));
  const fanout = ["fanout", "--rooms", rooms, "--sockets", String(FOLLOWERS), "--rate", String(rate), "--duration", "20", ...client];
  const single = Math.round(20_000 * scale);
  return {
    fanout: {
      title: `${rooms} rooms × ${FOLLOWERS} followers, ${rate} msg/s per room, 20 s`,
      common: fanout,
      variants: [
        { name: "single-room sockets", extra: spawnOn(18801) },
        { name: "multiplexed, 16 hubs", extra: [...spawnOn(18802), ...mux()] },
        { name: "multiplexed, 4 hubs", extra: [...spawnOn(18803), ...mux("--server-var", "MULTIPLEX_HUBS=4")] },
        // About one connection per hub: a room's flush is a push per follower, what an object per connection would pay.
        { name: "multiplexed, 1,024 hubs", extra: [...spawnOn(18804), ...mux("--server-var", "MULTIPLEX_HUBS=1024")] },
      ],
      metrics: FANOUT_METRICS,
    },
    idle: {
      title: `idle: 1,000 multiplexed connections × ${PER_CONNECTION} of 400 rooms (subscribed all at once) against ${single.toLocaleString("en-US")} single-room sockets, ${FOLLOWERS} per room`,
      common: ["connect", "--wave", "1000", "--hold", "10", ...client],
      variants: [
        { name: "single-room sockets", extra: [...spawnOn(18811), "--sockets", String(single), "--rooms", String(Math.round(single / FOLLOWERS))] },
        { name: "multiplexed, 16 hubs", extra: [...spawnOn(18812), "--sockets", "1000", "--rooms", "400", ...mux()] },
        { name: "multiplexed, 1,024 hubs", extra: [...spawnOn(18813), "--sockets", "1000", "--rooms", "400", ...mux("--server-var", "MULTIPLEX_HUBS=1024")] },
        { name: "Worker-held (bare workerd)", extra: ["--baseline-only", "--baseline-bare", "--bare-port", "18814", "--sockets", "1000", "--rooms", "400", ...mux()] },
      ],
      metrics: IDLE_METRICS,
    },
    // The Pusher front door (docs/pusher.md): Pusher connections following the same rooms as channels, on Pusher hubs.
    pusher: {
      title: `Pusher connections against multiplexed connections: ${rooms} rooms × ${FOLLOWERS} followers, ${PER_CONNECTION} per connection, ${rate} msg/s per room, 20 s`,
      common: fanout,
      variants: [
        { name: "multiplexed, 16 hubs", extra: [...spawnOn(18841), ...mux()] },
        { name: "Pusher, 16 Pusher hubs", extra: [...spawnOn(18842), ...mux("--pusher")] },
      ],
      metrics: FANOUT_METRICS,
    },
    "pusher-idle": {
      title: `idle: 1,000 connections × ${PER_CONNECTION} of 400 rooms, subscribed all at once: multiplexed against Pusher`,
      common: ["connect", "--wave", "1000", "--hold", "10", ...client, "--sockets", "1000", "--rooms", "400"],
      variants: [
        { name: "multiplexed, 16 hubs", extra: [...spawnOn(18843), ...mux()] },
        { name: "Pusher, 16 Pusher hubs", extra: [...spawnOn(18844), ...mux("--pusher")] },
      ],
      metrics: IDLE_METRICS,
    },
    // The runtime's floor (load/baselines/bare-workerd): its rooms' own sockets, and the same rooms followed through
    // connections the Worker holds itself with an internal socket per room (relay.ts).
    "worker-held": {
      title: `the runtime's floor: ${rooms} rooms × ${FOLLOWERS} followers, ${rate} msg/s per room, 20 s, bare workerd rooms`,
      common: [...fanout, "--baseline-only", "--baseline-bare"],
      variants: [
        { name: "bare, single-room sockets", extra: ["--bare-port", "18831"] },
        { name: "bare, Worker-held", extra: ["--bare-port", "18833", ...mux()] },
      ],
      metrics: FANOUT_METRICS,
    },
    // At full size (1,000 connections × 20 of 400 rooms), at 0.5 msg/s per room: 200 publishes and
    // 10,000 deliveries a second, what this machine carries beside 20,000 resumes at once.
    storm: {
      title: "reconnect storm: 1,000 multiplexed connections × 20 of 400 rooms (50 followers each), 0.5 msg/s per room, every connection cut at 5 s",
      common: ["storm", "--rooms", "400", "--sockets", String(FOLLOWERS), ...mux(), "--rate", "0.5", "--duration", "25", "--drop-at", "5", ...client],
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
}

export default defineBench({
  name: "multiplex",
  title: "multiplexed connections (GET /ws, hubs) against single-room sockets carrying the same subscriptions",
  about: `Multiplexed connections against single-room sockets carrying the same subscriptions, side by side in one
invocation: each table runs its variants in interleaved rounds and prints the median, the lowest-highest and
the spread, and ratios of medians against the first variant. docs/benchmarks.md, "Multiplexed connections",
holds the figures. Build first (npm run build); run it under flock /tmp/bench.lock.

Tables:
  fanout       R rooms × 50 followers, 2 msg/s per room: single-room sockets (R × 50), multiplexed connections
               following 20 rooms each on the default 16 hubs, on 4, and on 1,024 (about one connection per hub)
  idle         1,000 multiplexed connections opened, then all subscribing to 20 of 400 rooms at once (the
               subscribe storm), on 16 hubs and on 1,024, against single-room sockets, 50 per room
  worker-held  the fanout table's shape on the bare workerd baseline: its rooms' own sockets against connections
               the Worker holds itself, with an internal socket per room (load/baselines/bare-workerd/relay.ts)
  storm        1,000 multiplexed connections × 20 of 400 rooms at 0.5 msg/s per room, every connection cut at
               once after 5 s, reconnecting with full jitter and resuming each room with since/epoch
  pusher       the fanout table's shape: multiplexed connections against Pusher connections (/app/{key},
               docs/pusher.md) following the same rooms as channels, on 16 hubs of each kind
  pusher-idle  the idle table's 1,000 × 20 of 400: multiplexed against Pusher connections
--scale F multiplies the rooms of fanout and worker-held (and the single-room sockets of idle): 400 rooms × 50
(20,000 sockets) are past a descriptor limit of 20,000, so 0.75 is the largest both columns reach equally
there; 0.25, the default, is what a 2-core machine publishes at 2 msg/s per room without the server's thread
saturating. The result goes to load/results/multiplex-<time>.json (npm run capacity -- --mux-from reads it).`,
  options: {
    table: { default: "all", help: "fanout, idle, worker-held, storm, pusher, pusher-idle or all" },
    rounds: { default: "3", help: "interleaved rounds, 1 to 9" },
    scale: { default: "0.25", help: "share of 400 rooms (fanout, worker-held) and of 20,000 single-room sockets (idle), in (0, 1]" },
    rate: { default: "2", help: "messages per second per room of fanout and worker-held, in (0, 50]" },
    print: { flag: true, help: "only print the commands" },
  },
  async run(args) {
    const rounds = args.int("rounds", { min: 1, max: 9 });
    const scale = args.number("scale", { min: 0.0001, max: 1 });
    const rate = args.number("rate", { min: 0.0001, max: 50 });
    const all = tables(scale, rate);
    const table = args.text("table") ?? "all";
    const names = table === "all" ? Object.keys(all) : [table];
    for (const name of names) if (!all[name]) throw new Error(`unknown table ${name}: one of ${Object.keys(all).join(", ")}, all`);
    // Up to 15,000 sockets on workerd listening itself: room for them below the descriptor limit.
    const env = { ...process.env, CONNECTION_CEILING: process.env.CONNECTION_CEILING ?? "15000" };
    const result: MultiplexResult = { ...resultHeader("multiplex", args.argv), bench: "multiplex", rounds, scale, rate, tables: [] };
    for (const name of names) {
      const spec = all[name] as Table;
      if (args.flag("print")) {
        for (const v of spec.variants) log(`${name}, ${v.name}: npm run load -- ${[...spec.common, ...v.extra].join(" ")}`);
        continue;
      }
      const ran = await runVariants(spec.variants, spec.common, rounds, { env, only: "first" });
      console.log([`### ${name}: ${spec.title}`, medianTable(ran.columns, spec.metrics, rounds), ...columnNotes(ran.columns, rounds), ""].join("\n"));
      result.tables.push({ name, title: spec.title, common: spec.common, columns: ran.columns });
    }
    if (!args.flag("print")) console.log(`results: ${writeResult(result)}`);
  },
});
