#!/usr/bin/env node
// Broadcast benchmark: opens sockets in many rooms, sends POST /broadcast a few
// times, and measures for each broadcast the time until the last socket had it
// and the server CPU it cost (workerd's utime + stime from /proc, so Linux only).
//
// Usage:
//   node load/bench/broadcast.mjs [--rooms 1000] [--per-room 1] [--broadcasts 5]
//        [--select rooms|prefix] [--port 18320] [--payload 100] [--shards N] [--idle-before 1]
//        [--url URL --pid PID]
//
// --idle-before S waits S seconds between the registry check and the first broadcast;
// over 10 s the rooms hibernate, so the first broadcast also measures waking them.
//
// Without --url it starts the local server (local-server/server.mjs --no-build: build
// first with `node tools/build-worker.mjs`) on --port with a fresh data directory and
// stops it at the end. Everything is bounded: the run gives up after --max-seconds (300).

import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import WebSocket from "ws";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, arg, i, all) => (arg.startsWith("--") ? [...pairs, [arg.slice(2), all[i + 1]]] : pairs), []),
);
const ROOMS = Number(args.rooms ?? 1000);
const PER_ROOM = Number(args["per-room"] ?? 1);
const BROADCASTS = Number(args.broadcasts ?? 5);
const SELECT = args.select ?? "rooms";
const PORT = Number(args.port ?? 18320);
const PAYLOAD = Number(args.payload ?? 100);
const MAX_SECONDS = Number(args["max-seconds"] ?? 300);
const IDLE_BEFORE = Number(args["idle-before"] ?? 1);
const CONNECT_IN_FLIGHT = 100;
const CLK_TCK = 100;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const hardStop = setTimeout(() => {
  console.error(`gave up after ${MAX_SECONDS} s`);
  void shutdown(2);
}, MAX_SECONDS * 1000);

let server = null;
let dataDir = null;
const sockets = [];

async function startServer() {
  dataDir = mkdtempSync(join(tmpdir(), "broadcast-bench-"));
  const script = fileURLToPath(new URL("../../local-server/server.mjs", import.meta.url));
  const vars = args.shards ? ["--var", `COORDINATOR_SHARDS=${args.shards}`] : [];
  const child = spawn(process.execPath, [script, "--no-build", "--no-dev-vars", ...vars], {
    env: { ...process.env, PORT: String(PORT), DATA_DIR: dataDir },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const keep = (d) => (output = (output + d).slice(-20_000));
  child.stdout.on("data", keep);
  child.stderr.on("data", keep);
  const deadline = Date.now() + 30_000;
  while (!/workerd pid (\d+)/.test(output)) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`server did not start:\n${output}`);
    await sleep(100);
  }
  return { child, pid: Number(/workerd pid (\d+)/.exec(output)[1]), url: `http://127.0.0.1:${PORT}`, output: () => output };
}

/** utime + stime of a process, milliseconds. */
function cpuMs(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLK_TCK;
}

function rssMb(pid) {
  const line = readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith("VmRSS:"));
  return Number(line?.split(/\s+/)[1] ?? 0) / 1024;
}

/** One socket: remembers when each broadcast id arrived; acks and pings like a real client. */
function openSocket(wsBase, room, received) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${wsBase}/rooms/${room}/ws`);
    const timer = setTimeout(() => reject(new Error(`connect timeout ${room}`)), 15_000);
    ws.on("open", () => {
      clearTimeout(timer);
      const ping = setInterval(() => ws.readyState === ws.OPEN && ws.send("ping"), 20_000);
      ws.on("close", () => clearInterval(ping));
      resolve(ws);
    });
    ws.on("message", (data) => {
      const now = performance.now();
      const text = data.toString();
      if (text === "pong") return;
      const parsed = JSON.parse(text);
      for (const event of Array.isArray(parsed) ? parsed : [parsed]) {
        if (event.type !== "message") continue;
        const id = event.data?.bench;
        if (id !== undefined) received.get(id)?.push(now);
        ws.send(JSON.stringify({ type: "ack", seq: event.seq }));
      }
    });
    ws.on("error", (e) => {
      clearTimeout(timer);
      reject(e);
    });
  });
}

const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];

async function shutdown(code) {
  clearTimeout(hardStop);
  if (code !== 0 && server?.output) console.error(`server output (tail):\n${server.output().split("\n").slice(-15).join("\n")}`);
  for (const ws of sockets) ws.terminate();
  if (server?.child && server.child.exitCode === null) {
    const exited = new Promise((r) => server.child.once("exit", r));
    server.child.kill("SIGTERM");
    await Promise.race([exited, sleep(10_000)]);
    if (server.child.exitCode === null) server.child.kill("SIGKILL");
  }
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  process.exit(code);
}

async function main() {
  server = args.url ? { url: args.url, pid: Number(args.pid) } : await startServer();
  const wsBase = server.url.replace(/^http/, "ws");
  const prefix = `bench-${Date.now().toString(36)}-`;
  const rooms = Array.from({ length: ROOMS }, (_, i) => `${prefix}${String(i).padStart(5, "0")}`);
  const received = new Map();

  const connectStart = performance.now();
  const targets = rooms.flatMap((room) => Array.from({ length: PER_ROOM }, () => room));
  let next = 0;
  await Promise.all(
    Array.from({ length: CONNECT_IN_FLIGHT }, async () => {
      while (next < targets.length) sockets.push(await openSocket(wsBase, targets[next++], received));
    }),
  );
  console.error(`${sockets.length} sockets in ${rooms.length} rooms connected in ${((performance.now() - connectStart) / 1000).toFixed(1)} s`);

  // Every room registered (0 -> 1 reports are asynchronous).
  const registryStart = performance.now();
  for (;;) {
    let count = 0;
    let cursor = null;
    do {
      const page = await (await fetch(`${server.url}/rooms?prefix=${prefix}&limit=1000${cursor ? `&cursor=${cursor}` : ""}`)).json();
      count += page.rooms.length;
      cursor = page.cursor;
    } while (cursor);
    if (count === ROOMS) break;
    if (performance.now() - registryStart > 30_000) throw new Error(`registry lists ${count} of ${ROOMS} rooms after 30 s`);
    await sleep(200);
  }
  console.error(`registry lists all ${ROOMS} rooms ${((performance.now() - registryStart) / 1000).toFixed(1)} s after the last connect`);
  await sleep(IDLE_BEFORE * 1000);

  const results = [];
  for (let b = 0; b < BROADCASTS; b++) {
    const id = b;
    received.set(id, []);
    const body = JSON.stringify({ data: { bench: id, pad: "x".repeat(PAYLOAD) }, ...(SELECT === "prefix" ? { prefix } : { rooms }) });
    const cpu0 = server.pid ? cpuMs(server.pid) : 0;
    const t0 = performance.now();
    const res = await fetch(`${server.url}/broadcast`, { method: "POST", headers: { "content-type": "application/json" }, body });
    const answer = await res.json();
    const httpMs = performance.now() - t0;
    const deadline = performance.now() + 60_000;
    while (received.get(id).length < sockets.length && performance.now() < deadline) await sleep(5);
    const times = received.get(id).map((t) => t - t0).sort((a, b) => a - b);
    const cpu1 = server.pid ? cpuMs(server.pid) : 0;
    results.push({
      broadcast: b,
      status: res.status,
      rooms: answer.rooms,
      sockets: answer.sockets,
      failed: answer.failedCount,
      receivedBy: times.length,
      httpMs: Math.round(httpMs),
      firstMs: Math.round(times[0] ?? NaN),
      p50Ms: Math.round(pct(times, 50) ?? NaN),
      p99Ms: Math.round(pct(times, 99) ?? NaN),
      lastMs: Math.round(times[times.length - 1] ?? NaN),
      serverCpuMs: Math.round(cpu1 - cpu0),
    });
    console.error(JSON.stringify(results[results.length - 1]));
    await sleep(2000);
  }

  const lasts = results.map((r) => r.lastMs).sort((a, b) => a - b);
  const cpus = results.map((r) => r.serverCpuMs).sort((a, b) => a - b);
  const summary = {
    select: SELECT,
    rooms: ROOMS,
    socketsPerRoom: PER_ROOM,
    broadcasts: BROADCASTS,
    payloadBytes: PAYLOAD,
    allReceivedEveryBroadcast: results.every((r) => r.receivedBy === sockets.length),
    idleBeforeFirstSeconds: IDLE_BEFORE,
    medianLastMs: lasts[Math.floor(lasts.length / 2)],
    worstLastMs: lasts[lasts.length - 1],
    medianServerCpuMs: cpus[Math.floor(cpus.length / 2)],
    serverRssMb: server.pid ? Math.round(rssMb(server.pid)) : null,
    loadavg: readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" "),
    results,
  };
  console.log(JSON.stringify(summary, null, 2));
  await shutdown(0);
}

process.on("uncaughtException", (error) => {
  console.error(error);
  void shutdown(1);
});

main().catch((error) => {
  console.error(error);
  void shutdown(1);
});
