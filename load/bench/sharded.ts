import { existsSync } from "node:fs";
import { join } from "node:path";
import { defineBench, log } from "../src/kit/bench";
import { runLoadTool } from "../src/kit/load-runs";
import { REPO_ROOT } from "../src/kit/paths";
import { hardDescriptorLimit } from "../src/kit/proc";
import { resultHeader, writeResult } from "../src/kit/results";
import { Server } from "../src/kit/server";
import { sleep } from "../src/kit/time";
import type { ShardedResult, TargetRun } from "../src/result";

/**
 * Stats of a sharded room ask every leaf: polled rarely while CPU per delivery is measured (each read costs the
 * root an RPC per leaf), often during the storm, whose request rate is the figure.
 */
const FANOUT_POLL_MS = 5000;
const STORM_POLL_MS = 500;
/**
 * An RPC from one object to another, issue and receive together, µs of CPU: one Durable Object calling 100 others
 * locally took ~38 ms of CPU (docs/sharded-rooms.md). Used to split what the tree adds into its pushes and what
 * the leaves add per delivery.
 */
const RPC_US = 380;

interface RoomSample {
  at: number;
  connections: number;
  rootConnections: number;
  leaves: number;
  seq: number;
  rootRequests: Record<string, number> | null;
  leafPushes: number;
  perLeaf: number[];
}

const totalRequests = (r: Record<string, number> | null | undefined): number => (r ? Object.values(r).reduce((a, b) => a + b, 0) : 0);

/** workerd listening itself (its CPU is the whole server's), with a connection ceiling that fits the run. */
function startServer(port: number, shard: number, ceiling: number): Promise<Server> {
  return Server.start({ kind: "ours", port, gate: "off", args: ["--ceiling", String(ceiling)], vars: { ROOM_SHARD_SOCKETS: String(shard) }, startTimeoutMs: 60_000 });
}

/** Polls the room's stats (the load tool names its room lt-…) until stopped: what the root was asked, over time. */
function pollRoom(server: Server, everyMs: number): { samples: RoomSample[]; stop: () => Promise<void> } {
  const samples: RoomSample[] = [];
  let room: string | undefined;
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const at = Date.now();
      try {
        if (room === undefined) {
          const list = (await (await fetch(`${server.url}/rooms`)).json()) as { rooms?: Array<{ room?: string; name?: string }> };
          room = (list.rooms ?? []).map((r) => r.room ?? r.name).find((name) => typeof name === "string" && name.startsWith("lt-"));
        }
        if (room !== undefined) {
          const s = (await (await fetch(`${server.url}/rooms/${encodeURIComponent(room)}`, { signal: AbortSignal.timeout(3000) })).json()) as {
            connections: number;
            rootConnections?: number;
            leaves?: Array<{ connections: number }>;
            seq: number;
            rootRequests?: Record<string, number>;
            leafPushes?: number;
          };
          samples.push({ at, connections: s.connections, rootConnections: s.rootConnections ?? s.connections, leaves: s.leaves?.length ?? 0, seq: s.seq, rootRequests: s.rootRequests ?? null, leafPushes: s.leafPushes ?? 0, perLeaf: (s.leaves ?? []).map((l) => l.connections) });
        }
      } catch {
        // the server is busy or between phases: the next poll tells
      }
      await sleep(everyMs - (Date.now() - at));
    }
  })();
  return { samples, stop: async () => ((stopped = true), await loop) };
}

/** Runs one load scenario against `server` (its workerd sampled by pid); the run against it. */
async function runLoad(server: Server, scenario: string, extra: string[]): Promise<TargetRun> {
  const args = [scenario, "--url", server.url, "--server-pid", String(server.pid), "--quiet", "--no-report", ...extra];
  log(`[sharded] npm run load -- ${args.join(" ")}`);
  const { report } = await runLoadTool(args);
  const run = report.runs[0];
  if (!run) throw new Error(`load ${scenario}: no run in the report`);
  return run;
}

const PICKED = ["connected", "published", "publishRate", "expected", "delivered", "lost", "gaps", "duplicates", "deliveriesPerSecond", "serverCpuPerDeliveryUs", "deliveriesPerServerCpuSecond", "deliveriesPerServerCpuSecondPlusMinus", "eventsPerFrame", "allReachedP50Ms", "allReachedP99Ms", "latencyP50Ms", "latencyP99Ms", "latencyMaxMs", "serverCpuPercent", "clientCpuPercent", "machineBusyPercent", "allBackMs", "notBack", "reconnectAttempts", "reconnectFailures", "lostNever"] as const;
type Picked = Partial<Record<(typeof PICKED)[number] | "serverRssPeakMb", number>>;

function pick(s: TargetRun["summary"]): Picked {
  const out: Picked = Object.fromEntries(PICKED.map((key) => [key, s[key]]));
  if (s.serverRssPeakBytes !== undefined) out.serverRssPeakMb = s.serverRssPeakBytes / 1048576;
  return out;
}

const totalsOf = (run: TargetRun): { outOfOrder?: number; unconfirmed?: number } => (run.details.deliveryTotals ?? {}) as { outOfOrder?: number; unconfirmed?: number };

interface FanoutRun {
  name: string;
  shard: number;
  ok: boolean;
  error: string | undefined;
  summary: Picked;
  outOfOrder: number | undefined;
  unconfirmed: number | undefined;
  leaves: number;
  socketsPerObject: number[];
  leafPushes: number;
  rootRequests: Record<string, number> | null;
  notes: string[];
}

async function fanout(o: Sizes, name: string, shard: number): Promise<FanoutRun> {
  const server = await startServer(o.port, shard, Math.min(hardDescriptorLimit() - 1000, o.sockets + 1500));
  const poll = pollRoom(server, FANOUT_POLL_MS);
  try {
    const run = await runLoad(server, "fanout", ["--sockets", String(o.sockets), "--rate", String(o.rate), "--duration", String(o.duration), "--procs", "2", "--in-flight", "128"]);
    await poll.stop();
    // The figures while every socket was open (the last samples may be taken as they close).
    const last = poll.samples.reduce<RoomSample | undefined>((best, s) => (best === undefined || s.connections >= best.connections ? s : best), undefined);
    return {
      name,
      shard,
      ok: run.ok,
      error: run.error,
      summary: pick(run.summary),
      outOfOrder: totalsOf(run).outOfOrder,
      unconfirmed: totalsOf(run).unconfirmed,
      leaves: last?.leaves ?? 0,
      socketsPerObject: last ? [last.rootConnections, ...last.perLeaf] : [],
      leafPushes: poll.samples.at(-1)?.leafPushes ?? 0,
      rootRequests: poll.samples.at(-1)?.rootRequests ?? null,
      notes: run.notes,
    };
  } finally {
    await poll.stop();
    await server.stop();
  }
}

async function storm(o: Sizes, shard: number) {
  // Reconnects arrive while the runtime still holds the dropped sockets' descriptors (about 10 s):
  // the ceiling leaves room for both, short of the limit at which workerd would abort.
  const server = await startServer(o.port, shard, hardDescriptorLimit() - 1500);
  const poll = pollRoom(server, STORM_POLL_MS);
  try {
    const run = await runLoad(server, "storm", [
      ...["--sockets", String(o.stormSockets), "--rate", String(o.stormRate), "--duration", "30", "--drop-at", "8", "--procs", "2", "--in-flight", "128"],
      ...["--backoff-base", "500", "--backoff-max", "10000", "--deadline", "30000"],
    ]);
    await poll.stop();
    // The storm: from the drop until every socket was back (the run's marks are relative to its start).
    const drop = run.marks.find((m) => m.label === "drop");
    const from = drop ? Date.parse(run.startedAt) + drop.t : undefined;
    const to = from !== undefined && run.summary.allBackMs !== undefined ? from + run.summary.allBackMs : undefined;
    let during;
    if (from !== undefined && to !== undefined) {
      const before = poll.samples.filter((s) => s.at <= from).at(-1);
      const after = poll.samples.find((s) => s.at >= to) ?? poll.samples.at(-1);
      const inside = poll.samples.filter((s) => s.at >= from && s.at <= (after?.at ?? to));
      let peak = 0;
      for (let i = 1; i < inside.length; i++) {
        const [a, b] = [inside[i - 1] as RoomSample, inside[i] as RoomSample];
        peak = Math.max(peak, (totalRequests(b.rootRequests) - totalRequests(a.rootRequests)) / ((b.at - a.at) / 1000));
      }
      if (before && after) {
        const seconds = (after.at - before.at) / 1000;
        const byKindPerSecond = Object.fromEntries(Object.entries(after.rootRequests ?? {}).map(([k, n]) => [k, (n - (before.rootRequests?.[k] ?? 0)) / seconds]));
        during = {
          seconds,
          rootRequestsPerSecond: (totalRequests(after.rootRequests) - totalRequests(before.rootRequests)) / seconds,
          rootRequestsPerSecondPeak: peak,
          byKindPerSecond,
          leavesBefore: before.leaves,
          leavesAfter: after.leaves,
          rootSocketsBefore: before.rootConnections,
          rootSocketsAfter: after.rootConnections,
        };
      }
    }
    const details = run.details as { storm?: { reconnectFailuresByCause?: unknown }; closesByCode?: unknown };
    return {
      ok: run.ok,
      error: run.error,
      sockets: o.stormSockets,
      shard,
      rate: o.stormRate,
      summary: pick(run.summary),
      outOfOrder: totalsOf(run).outOfOrder,
      reconnectFailuresByCause: details.storm?.reconnectFailuresByCause,
      closesByCode: details.closesByCode,
      during,
      rootRequestsTimeline: poll.samples.map((s) => ({ t: s.at - (from ?? s.at), connections: s.connections, requests: totalRequests(s.rootRequests) })),
      notes: run.notes,
    };
  } finally {
    await poll.stop();
    await server.stop();
  }
}

/** Per-step costs from the two fanout runs: what the tree adds, per push and per delivery on a leaf, on top of the same sends. */
function steps(one: FanoutRun, tree: FanoutRun): NonNullable<ShardedResult["steps"]> {
  const cpuUs = (r: FanoutRun): number => (r.summary.serverCpuPerDeliveryUs ?? 0) * (r.summary.delivered ?? 0);
  const extraUs = cpuUs(tree) - cpuUs(one);
  const delivered = tree.summary.delivered ?? 0;
  const published = tree.summary.published ?? 0;
  const onLeaves = tree.socketsPerObject.slice(1).reduce((a, b) => a + b, 0);
  const leafDeliveries = delivered * (onLeaves / Math.max(1, tree.summary.connected ?? 0));
  return {
    sendPerDeliveryUs: one.summary.serverCpuPerDeliveryUs,
    eventsPerFrame: one.summary.eventsPerFrame,
    treeExtraCpuMs: extraUs / 1000,
    pushesPerMessage: published ? tree.leafPushes / published : undefined,
    cpuPerLeafPushUs: tree.leafPushes ? extraUs / tree.leafPushes : undefined,
    leafDeliveries,
    // What is left of the tree's extra CPU once its pushes are paid at RPC_US each, per delivery on a leaf.
    leafExtraPerDeliveryUs: leafDeliveries > 0 ? Math.max(0, extraUs - tree.leafPushes * RPC_US) / leafDeliveries : undefined,
    treeExtraPerDeliveryUs: extraUs / delivered,
    rootRequestsPerMessage: published && tree.rootRequests ? totalRequests(tree.rootRequests) / published : undefined,
    ratio: (tree.summary.deliveriesPerServerCpuSecond ?? 0) / (one.summary.deliveriesPerServerCpuSecond ?? 1),
  };
}

interface Sizes {
  sockets: number;
  shard: number;
  stormSockets: number;
  stormRate: number;
  rate: number;
  duration: number;
  port: number;
}

export default defineBench({
  name: "sharded",
  title: "sharded rooms: one object against a root and leaves, fanout and reconnect storm, per-step costs",
  about: `Sharded rooms, measured locally in one run (docs/sharded-rooms.md):
1. fanout: one room of --sockets sockets, first as one object (ROOM_SHARD_SOCKETS=0), then sharded at --shard
   sockets per object (a root and about sockets/shard leaves), same load: deliveries per server CPU-second,
   publish-to-every-socket and per-delivery latency, and per socket nothing lost, no duplicate, order kept.
2. storm: --storm-sockets sockets of a room cut at once, reconnecting with full jitter and since, as one object
   and sharded: all back, nothing lost, and what the sharded root is asked per second meanwhile (room stats
   rootRequests, polled).
3. per-step costs derived from the two fanout runs: CPU per delivery (one socket send), CPU per leaf push, and the
   pushes and root requests per message, for the Cloudflare model (npm run capacity -- --shard-from).
workerd runs every object of a process on one thread here, so a tree cannot be faster than one object locally:
what this measures is what the tree costs on top of the sends. Each server is started here (workerd listening
itself, --gate off, a connection ceiling that fits the run) and stopped at the end. Build first: npm run build.
Run it under flock /tmp/bench.lock. The result goes to load/results/sharded-<time>.json.`,
  options: {
    sockets: { default: "15000", help: "fanout: sockets of the room" },
    shard: { default: "2000", help: "ROOM_SHARD_SOCKETS of the sharded runs" },
    "storm-sockets": { default: "10000", help: "storm: sockets cut at once" },
    // One thread delivers ~35-40k messages a second here: the storm's own fan-out must leave room for the reconnects.
    "storm-rate": { default: "1", help: "storm: messages per second" },
    rate: { default: "2", help: "fanout: messages per second" },
    duration: { default: "20", help: "fanout: seconds of publishing" },
    port: { default: "18451", help: "port of each server in turn" },
    only: { default: "all", help: "fanout, storm or all" },
    "max-seconds": { default: "1200", help: "the run gives up after this long" },
  },
  limitSeconds: (args) => args.number("max-seconds", { min: 1 }),
  async run(args) {
    const o: Sizes = {
      sockets: args.int("sockets", { min: 1 }),
      shard: args.int("shard", { min: 1 }),
      stormSockets: args.int("storm-sockets", { min: 1 }),
      stormRate: args.number("storm-rate", { min: 0.01 }),
      rate: args.number("rate", { min: 0.01 }),
      duration: args.number("duration", { min: 1 }),
      port: args.int("port"),
    };
    const only = args.text("only") ?? "all";
    const limit = hardDescriptorLimit();
    log(`[sharded] descriptor hard limit ${limit}; ${o.sockets} sockets (+ ${Math.ceil(o.sockets / 2)} per client process)`);
    if (o.sockets + 1500 > limit - 1000) throw new Error(`${o.sockets} sockets do not fit a descriptor limit of ${limit} (workerd holds one per socket)`);
    for (const built of ["dist/worker.js", "load/dist/cli.js"]) if (!existsSync(join(REPO_ROOT, built))) throw new Error(`${built} is missing: npm run build && node load/build.mjs`);
    const result: ShardedResult & Record<string, unknown> = { ...resultHeader("sharded", args.argv), bench: "sharded", sockets: o.sockets, shard: o.shard, rate: o.rate, durationSeconds: o.duration, descriptorLimit: limit };
    const save = (): string => writeResult(result);
    if (only === "all" || only === "fanout") {
      log("[sharded] fanout, one object (ROOM_SHARD_SOCKETS=0)");
      const one = await fanout(o, "one object", 0);
      await sleep(12_000); // closed sockets' descriptors are released about 10 s later
      log(`[sharded] fanout, sharded (ROOM_SHARD_SOCKETS=${o.shard})`);
      const tree = await fanout(o, "sharded", o.shard);
      result.fanout = [one, tree];
      if (one.ok && tree.ok) result.steps = steps(one, tree);
      save();
    }
    if (only === "all" || only === "storm") {
      if (result.fanout) await sleep(12_000);
      // The same storm against one object first, for comparison: what is the tree's and what the machine's.
      for (const [key, shard] of [["stormOneObject", 0], ["storm", o.shard]] as const) {
        log(`[sharded] storm, ${o.stormSockets} sockets, ROOM_SHARD_SOCKETS=${shard}`);
        result[key] = await storm(o, shard).catch((error: unknown) => ({ ok: false, error: String(error instanceof Error ? error.message : error).slice(0, 4000) }));
        save();
        if (key === "stormOneObject") await sleep(12_000);
      }
    }
    log(`[sharded] written ${save().replace(REPO_ROOT, "")}`);
    console.log(JSON.stringify(result, null, 2));
  },
});
