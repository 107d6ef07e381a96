#!/usr/bin/env node
// Sharded rooms, measured locally in one run (docs/sharded-rooms.md):
//
// 1. fanout: one room of --sockets sockets, first as one object (ROOM_SHARD_SOCKETS=0), then
//    sharded at --shard sockets per object (a root and about sockets/shard leaves), same load:
//    deliveries per server CPU-second, publish-to-every-socket and per-delivery latency, and
//    per socket nothing lost, no duplicate, order kept (the load tool's ledger, by seq).
// 2. storm: --storm-sockets sockets of a room cut at once, reconnecting with full jitter and
//    `since`, as one object and sharded: all back, nothing lost, and what the sharded root is
//    asked per second meanwhile (room stats `rootRequests`, polled).
// 3. per-step costs derived from the two fanout runs: CPU per delivery (one socket send),
//    CPU per leaf push (root issuing the RPC + leaf receiving it + its bookkeeping), and the
//    pushes and root requests per message, for the Cloudflare model (`npm run capacity`).
//
// workerd runs every object of a process on one thread here, so a tree cannot be faster than
// one object locally: what this measures is what the tree costs on top of the sends.
//
// Each server is started by this script (local-server/server.mjs --no-build, workerd listening
// itself with --gate off so its CPU is the whole server's, a connection ceiling that fits the
// run) on --port with a fresh data directory, and killed at the end. Build first:
//   node tools/build-worker.mjs && node load/build.mjs
// Run it under the machine's benchmark lock:
//   flock /tmp/bench.lock node load/bench/sharded.mjs [--sockets 15000 --shard 2000 --storm-sockets 10000 --storm-rate 1
//     --rate 2 --duration 20 --port 18451 --only fanout|storm --max-seconds 1200]
// Prints one JSON object on stdout (progress on stderr) and writes it to load/results/sharded-<time>.json.

import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, arg, i, all) => (arg.startsWith("--") ? [...pairs, [arg.slice(2), all[i + 1]]] : pairs), []),
);
const root = fileURLToPath(new URL("../../", import.meta.url));
const SOCKETS = Number(args.sockets ?? 15_000);
const SHARD = Number(args.shard ?? 2000);
const STORM_SOCKETS = Number(args["storm-sockets"] ?? 10_000);
// One thread delivers ~35-40k messages a second here: the storm's own fan-out must leave room for the reconnects.
const STORM_RATE = Number(args["storm-rate"] ?? 1);
const RATE = Number(args.rate ?? 2);
const DURATION = Number(args.duration ?? 20);
const PORT = Number(args.port ?? 18451);
const ONLY = args.only ?? "all";
const MAX_SECONDS = Number(args["max-seconds"] ?? 1200);
/**
 * Stats of a sharded room ask every leaf: polled rarely while CPU per delivery is measured (each
 * read costs the root an RPC per leaf), often during the storm, whose request rate is the figure.
 */
const FANOUT_POLL_MS = 5000;
const STORM_POLL_MS = 500;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const log = (line) => process.stderr.write(`[sharded] ${line}\n`);

const running = new Set();
const hardStop = setTimeout(() => {
  log(`gave up after ${MAX_SECONDS} s`);
  stopAll().then(() => process.exit(2));
}, MAX_SECONDS * 1000);
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => stopAll().then(() => process.exit(130)));

/** The hard descriptor limit: workerd holds one per socket, each client process one per socket. */
function hardLimit() {
  const line = readFileSync("/proc/self/limits", "utf8").split("\n").find((l) => l.startsWith("Max open files"));
  const hard = line?.split(/\s{2,}/)[2];
  return hard === "unlimited" ? Infinity : Number(hard);
}

async function startServer(vars, sockets, ceilingOverride = null) {
  const dataDir = mkdtempSync(join(tmpdir(), "sharded-bench-"));
  // workerd aborts on EMFILE: the ceiling leaves the rest of the limit to connections that are not
  // sockets yet (reconnects whose old descriptors the runtime has not released).
  const ceiling = ceilingOverride ?? Math.min(hardLimit() - 1000, sockets + 1500);
  const varArgs = Object.entries(vars).flatMap(([k, v]) => ["--var", `${k}=${v}`]);
  const child = spawn(
    process.execPath,
    [join(root, "local-server/server.mjs"), "--no-build", "--no-dev-vars", "--gate", "off", "--ceiling", String(ceiling), ...varArgs],
    { cwd: root, env: { ...process.env, PORT: String(PORT), DATA_DIR: dataDir }, stdio: ["ignore", "pipe", "pipe"] },
  );
  let output = "";
  const keep = (d) => (output = (output + d).slice(-20_000));
  child.stdout.on("data", keep);
  child.stderr.on("data", keep);
  const server = { child, dataDir, pid: 0, url: `http://127.0.0.1:${PORT}`, ceiling, output: () => output };
  running.add(server);
  const deadline = Date.now() + 60_000;
  while (!/listening on/.test(output) || !/workerd pid (\d+)/.test(output)) {
    if (child.exitCode !== null || Date.now() > deadline) {
      await stopServer(server);
      throw new Error(`server did not start:\n${output}`);
    }
    await sleep(100);
  }
  server.pid = Number(/workerd pid (\d+)/.exec(output)[1]);
  return server;
}

async function stopServer(server) {
  running.delete(server);
  if (server.child.exitCode === null) {
    const exited = new Promise((r) => server.child.once("exit", r));
    server.child.kill("SIGTERM");
    await Promise.race([exited, sleep(10_000)]);
    if (server.child.exitCode === null) server.child.kill("SIGKILL");
  }
  // The launcher's watchdog ends workerd; make sure, by its pid only.
  if (server.pid > 0) {
    try {
      process.kill(server.pid, 0);
      process.kill(server.pid, "SIGKILL");
    } catch {
      // gone
    }
  }
  rmSync(server.dataDir, { recursive: true, force: true });
}

async function stopAll() {
  clearTimeout(hardStop);
  await Promise.all([...running].map((s) => stopServer(s)));
}

/** Polls the room's stats (the load tool names its room lt-…) until stopped: what the root was asked, over time. */
function pollRoom(server, everyMs) {
  const samples = [];
  let room = null;
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const at = Date.now();
      try {
        if (room === null) {
          const list = await (await fetch(`${server.url}/rooms`)).json();
          room = (list.rooms ?? []).map((r) => r.room ?? r.name).find((name) => typeof name === "string" && name.startsWith("lt-")) ?? null;
        }
        if (room !== null) {
          const s = await (await fetch(`${server.url}/rooms/${encodeURIComponent(room)}`, { signal: AbortSignal.timeout(3000) })).json();
          samples.push({
            at,
            connections: s.connections,
            rootConnections: s.rootConnections ?? s.connections,
            leaves: s.leaves?.length ?? 0,
            seq: s.seq,
            rootRequests: s.rootRequests ?? null,
            leafPushes: s.leafPushes ?? 0,
            perLeaf: (s.leaves ?? []).map((l) => l.connections),
          });
        }
      } catch {
        // the server is busy or between phases: the next poll tells
      }
      await sleep(Math.max(0, everyMs - (Date.now() - at)));
    }
  })();
  return { samples, stop: async () => ((stopped = true), await loop) };
}

/**
 * Runs one load scenario against `server` (its workerd sampled by pid) and returns the run's JSON,
 * read from the report file it writes (a large JSON on a pipe can be cut short when the tool exits).
 */
function runLoad(server, scenario, extra) {
  const cli = join(root, "load/dist/cli.js");
  const out = mkdtempSync(join(tmpdir(), "sharded-bench-out-"));
  const argv = [cli, scenario, "--url", server.url, "--server-pid", String(server.pid), "--out", out, "--quiet", ...extra];
  log(`node ${argv.slice(1).join(" ").replace(root, "")}`);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, argv, { cwd: root, stdio: ["ignore", "pipe", "pipe"] });
    let err = "";
    child.stdout.on("data", (d) => (err = (err + d).slice(-8000)));
    child.stderr.on("data", (d) => (err = (err + d).slice(-8000)));
    child.once("exit", (code) => {
      try {
        const file = readdirSync(out).find((name) => name.endsWith(".json"));
        if (!file) throw new Error("no JSON report written");
        const report = JSON.parse(readFileSync(join(out, file), "utf8"));
        rmSync(out, { recursive: true, force: true });
        const run = report.runs[0];
        if (!run) throw new Error("no run in the report");
        resolve(run);
      } catch (error) {
        reject(new Error(`load ${scenario} exited ${code}: ${error.message}\n${err}`));
      }
    });
  });
}

const pick = (s) => ({
  connected: s.connected,
  published: s.published,
  publishRate: s.publishRate,
  expected: s.expected,
  delivered: s.delivered,
  lost: s.lost,
  gaps: s.gaps,
  duplicates: s.duplicates,
  deliveriesPerSecond: s.deliveriesPerSecond,
  serverCpuPerDeliveryUs: s.serverCpuPerDeliveryUs,
  deliveriesPerServerCpuSecond: s.deliveriesPerServerCpuSecond,
  deliveriesPerServerCpuSecondPlusMinus: s.deliveriesPerServerCpuSecondPlusMinus,
  eventsPerFrame: s.eventsPerFrame,
  allReachedP50Ms: s.allReachedP50Ms,
  allReachedP99Ms: s.allReachedP99Ms,
  latencyP50Ms: s.latencyP50Ms,
  latencyP99Ms: s.latencyP99Ms,
  latencyMaxMs: s.latencyMaxMs,
  serverCpuPercent: s.serverCpuPercent,
  clientCpuPercent: s.clientCpuPercent,
  machineBusyPercent: s.machineBusyPercent,
  serverRssPeakMb: s.serverRssPeakBytes === undefined ? undefined : s.serverRssPeakBytes / 1048576,
  allBackMs: s.allBackMs,
  notBack: s.notBack,
  reconnectAttempts: s.reconnectAttempts,
  reconnectFailures: s.reconnectFailures,
  lostNever: s.lostNever,
});

const totalRequests = (r) => (r ? Object.values(r).reduce((a, b) => a + b, 0) : 0);

async function fanout(name, shard) {
  const server = await startServer({ ROOM_SHARD_SOCKETS: String(shard) }, SOCKETS);
  const poll = pollRoom(server, FANOUT_POLL_MS);
  try {
    const run = await runLoad(server, "fanout", [
      "--sockets", String(SOCKETS), "--rate", String(RATE), "--duration", String(DURATION), "--procs", "2", "--in-flight", "128",
    ]);
    await poll.stop();
    // The figures while every socket was open (the last samples may be taken as they close).
    const last = poll.samples.reduce((best, s) => (best === null || s.connections >= best.connections ? s : best), null);
    const totals = run.details.deliveryTotals ?? {};
    return {
      name,
      shard,
      ok: run.ok,
      error: run.error,
      summary: pick(run.summary),
      outOfOrder: totals.outOfOrder,
      unconfirmed: totals.unconfirmed,
      leaves: last?.leaves ?? 0,
      socketsPerObject: last ? [last.rootConnections, ...last.perLeaf] : [],
      leafPushes: poll.samples.at(-1)?.leafPushes ?? 0,
      rootRequests: poll.samples.at(-1)?.rootRequests ?? null,
      notes: run.notes,
    };
  } finally {
    await poll.stop();
    await stopServer(server);
  }
}

async function storm(shard) {
  // Reconnects arrive while the runtime still holds the dropped sockets' descriptors (about 10 s):
  // the ceiling leaves room for both, short of the limit at which workerd would abort.
  const server = await startServer({ ROOM_SHARD_SOCKETS: String(shard) }, STORM_SOCKETS, hardLimit() - 1500);
  const poll = pollRoom(server, STORM_POLL_MS);
  try {
    const run = await runLoad(server, "storm", [
      "--sockets", String(STORM_SOCKETS), "--rate", String(STORM_RATE), "--duration", "30", "--drop-at", "8", "--procs", "2", "--in-flight", "128",
      "--backoff-base", "500", "--backoff-max", "10000", "--deadline", "30000",
    ]);
    await poll.stop();
    // The storm: from the drop until every socket was back (the run's marks are relative to its start).
    const drop = run.marks.find((m) => m.label === "drop");
    const startedAt = Date.parse(run.startedAt);
    const from = drop ? startedAt + drop.t : null;
    const to = from !== null && run.summary.allBackMs !== undefined ? from + run.summary.allBackMs : null;
    let during = null;
    if (from !== null && to !== null) {
      const before = poll.samples.filter((s) => s.at <= from).at(-1);
      const after = poll.samples.find((s) => s.at >= to) ?? poll.samples.at(-1);
      const inside = poll.samples.filter((s) => s.at >= from && s.at <= (after?.at ?? to));
      let peak = 0;
      for (let i = 1; i < inside.length; i++) {
        const a = inside[i - 1];
        const b = inside[i];
        peak = Math.max(peak, (totalRequests(b.rootRequests) - totalRequests(a.rootRequests)) / ((b.at - a.at) / 1000));
      }
      if (before && after) {
        const seconds = (after.at - before.at) / 1000;
        const kinds = {};
        for (const k of Object.keys(after.rootRequests ?? {})) kinds[k] = (after.rootRequests[k] - (before.rootRequests?.[k] ?? 0)) / seconds;
        during = {
          seconds,
          rootRequestsPerSecond: (totalRequests(after.rootRequests) - totalRequests(before.rootRequests)) / seconds,
          rootRequestsPerSecondPeak: peak,
          byKindPerSecond: kinds,
          leavesBefore: before.leaves,
          leavesAfter: after.leaves,
          rootSocketsBefore: before.rootConnections,
          rootSocketsAfter: after.rootConnections,
        };
      }
    }
    const totals = run.details.deliveryTotals ?? {};
    return {
      ok: run.ok,
      error: run.error,
      sockets: STORM_SOCKETS,
      shard,
      rate: STORM_RATE,
      summary: pick(run.summary),
      outOfOrder: totals.outOfOrder,
      reconnectFailuresByCause: run.details.storm?.reconnectFailuresByCause,
      closesByCode: run.details.closesByCode,
      during,
      rootRequestsTimeline: poll.samples.map((s) => ({ t: s.at - (from ?? s.at), connections: s.connections, requests: totalRequests(s.rootRequests) })),
      notes: run.notes,
    };
  } finally {
    await poll.stop();
    await stopServer(server);
  }
}

/**
 * An RPC from one object to another, issue and receive together, µs of CPU: one Durable Object
 * calling 100 others locally took ~38 ms of CPU (docs/sharded-rooms.md). Used to split what the
 * tree adds into its pushes and what the leaves add per delivery.
 */
const RPC_US = 380;

/** Per-step costs from the two fanout runs: what the tree adds, per push and per delivery on a leaf, on top of the same sends. */
function steps(one, tree) {
  const cpuUs = (r) => r.summary.serverCpuPerDeliveryUs * r.summary.delivered;
  const extraUs = cpuUs(tree) - cpuUs(one);
  const onLeaves = tree.socketsPerObject.slice(1).reduce((a, b) => a + b, 0);
  const leafDeliveries = tree.summary.delivered * (onLeaves / Math.max(1, tree.summary.connected));
  return {
    sendPerDeliveryUs: one.summary.serverCpuPerDeliveryUs,
    eventsPerFrame: one.summary.eventsPerFrame,
    treeExtraCpuMs: extraUs / 1000,
    pushesPerMessage: tree.summary.published ? tree.leafPushes / tree.summary.published : undefined,
    cpuPerLeafPushUs: tree.leafPushes ? extraUs / tree.leafPushes : undefined,
    leafDeliveries,
    // What is left of the tree's extra CPU once its pushes are paid at RPC_US each, per delivery on a leaf.
    leafExtraPerDeliveryUs: leafDeliveries > 0 ? Math.max(0, extraUs - tree.leafPushes * RPC_US) / leafDeliveries : undefined,
    treeExtraPerDeliveryUs: extraUs / tree.summary.delivered,
    rootRequestsPerMessage: tree.summary.published && tree.rootRequests ? totalRequests(tree.rootRequests) / tree.summary.published : undefined,
    ratio: tree.summary.deliveriesPerServerCpuSecond / one.summary.deliveriesPerServerCpuSecond,
  };
}

async function main() {
  const limit = hardLimit();
  log(`descriptor hard limit ${limit}; ${SOCKETS} sockets (+ ${Math.ceil(SOCKETS / 2)} per client process)`);
  if (SOCKETS + 1500 > limit - 1000) throw new Error(`${SOCKETS} sockets do not fit a descriptor limit of ${limit} (workerd holds one per socket)`);
  for (const built of ["dist/worker.js", "load/dist/cli.js"]) {
    if (spawnSync("test", ["-f", join(root, built)]).status !== 0) throw new Error(`${built} is missing: node tools/build-worker.mjs && node load/build.mjs`);
  }
  const result = { bench: "sharded", startedAt: new Date().toISOString(), sockets: SOCKETS, shard: SHARD, rate: RATE, durationSeconds: DURATION, descriptorLimit: limit };
  mkdirSync(join(root, "load/results"), { recursive: true });
  const file = join(root, `load/results/sharded-${result.startedAt.replace(/[:.]/g, "-")}.json`);
  const save = () => writeFileSync(file, JSON.stringify(result, null, 2));
  if (ONLY === "all" || ONLY === "fanout") {
    log(`fanout, one object (ROOM_SHARD_SOCKETS=0)`);
    const one = await fanout("one object", 0);
    await sleep(12_000); // closed sockets' descriptors are released about 10 s later
    log(`fanout, sharded (ROOM_SHARD_SOCKETS=${SHARD})`);
    const tree = await fanout("sharded", SHARD);
    result.fanout = [one, tree];
    if (one.ok && tree.ok) result.steps = steps(one, tree);
    save();
  }
  if (ONLY === "all" || ONLY === "storm") {
    if (result.fanout) await sleep(12_000);
    // The same storm against one object first, for comparison: what is the tree's and what the machine's.
    for (const [key, shard] of [["stormOneObject", 0], ["storm", SHARD]]) {
      log(`storm, ${STORM_SOCKETS} sockets, ROOM_SHARD_SOCKETS=${shard}`);
      try {
        result[key] = await storm(shard);
      } catch (error) {
        result[key] = { ok: false, error: String(error.message ?? error).slice(0, 4000) };
      }
      save();
      if (key === "stormOneObject") await sleep(12_000);
    }
  }
  save();
  log(`written ${file.replace(root, "")}`);
  console.log(JSON.stringify(result, null, 2));
}

main()
  .catch((error) => {
    log(error.stack ?? String(error));
    process.exitCode = 1;
  })
  .finally(() => stopAll());
