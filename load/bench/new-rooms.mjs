#!/usr/bin/env node
// What a room's first publish costs, and what a burst of publishes into new
// rooms does: against the local server (or the bare workerd baseline), each
// started fresh on 127.0.0.1 and stopped at the end.
//
//   npm run build && node load/build.mjs
//   flock /tmp/bench.lock node load/bench/new-rooms.mjs [--targets ours,bare,bare-durable,before] [--first 300]
//        [--burst 10000] [--in-flight 20] [--gate off|auto] [--port 18721] [--age SECONDS]
//        [--before DIR] [--rounds 1]
//
// --age sets ours' (and before's) HISTORY_MAX_AGE_SECONDS, so that rooms give
// their storage back while the burst still runs; --before DIR adds the target
// "before", the local server of another checkout (built there), to compare the
// code before a change; --rounds N runs every target N times, in turn.
//
// 1. first publish: --first new rooms published into one at a time (nothing
//    else in flight), then the same rooms again (warm), each with a server CPU
//    per publish (utime+stime over the phase ÷ publishes) and latency; the
//    difference is the first publish's own cost (the room's storage created,
//    its registration).
// 2. burst: --burst publishes, each into a room of its own, --in-flight at
//    once on keep-alive connections; every publish ends in an HTTP answer
//    (counted by status) or a connection error (counted by cause), and the
//    server's log lines that mention an error are kept for the reader.
// Bounded: every request has a 30 s timeout, the burst stops after 300 s.

import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { Agent, request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cpuMs, ROOT, rssMb, startLocalServer, stopLocalServer } from "./local-server.mjs";

const argv = process.argv.slice(2);
const option = (name, fallback) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : fallback;
};
const TARGETS = option("targets", "ours,bare,bare-durable").split(",");
const FIRST = Number(option("first", "300"));
const BURST = Number(option("burst", "10000"));
const IN_FLIGHT = Number(option("in-flight", "20"));
const GATE = option("gate", "off");
const PORT = Number(option("port", "18721"));
const AGE = option("age", null);
const BEFORE = option("before", null);
const ROUNDS = Number(option("rounds", "1"));
const BURST_LIMIT_MS = 300_000;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// Servers must not outlive this script, whatever ends it (one listener for all of them).
const running = new Set();
process.on("exit", () => running.forEach((child) => child.kill("SIGKILL")));

async function startBare(durable) {
  const dir = mkdtempSync(join(tmpdir(), "new-rooms-bare-"));
  const child = spawn(process.execPath, [join(ROOT, "load/dist/bare-server.js"), "--port", String(PORT), "--data", dir, ...(durable ? ["--durable"] : [])], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const keep = (d) => (output = (output + d).slice(-200_000));
  child.stdout.on("data", keep);
  child.stderr.on("data", keep);
  running.add(child);
  child.once("exit", () => running.delete(child));
  const deadline = Date.now() + 30_000;
  for (;;) {
    const pid = /workerd pid (\d+)/.exec(output)?.[1];
    if (pid && (await fetch(`http://127.0.0.1:${PORT}/healthz`).then((r) => r.ok, () => false))) {
      return {
        pid: Number(pid),
        url: `http://127.0.0.1:${PORT}`,
        output: () => output,
        stop: async () => {
          const exited = new Promise((r) => child.once("exit", r));
          child.kill("SIGTERM");
          await Promise.race([exited, sleep(5000)]);
          child.kill("SIGKILL");
          rmSync(dir, { recursive: true, force: true });
        },
      };
    }
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`bare baseline did not start:\n${output}`);
    await sleep(100);
  }
}

async function start(target) {
  if (target === "bare" || target === "bare-durable") return startBare(target === "bare-durable");
  // The local server keeps a bounded tail of its output; the burst's errors are in the last lines.
  const vars = AGE === null ? {} : { HISTORY_MAX_AGE_SECONDS: AGE };
  if (target === "before" && BEFORE === null) throw new Error("the target before needs --before DIR");
  const server = await startLocalServer({ port: PORT, gate: GATE, label: "new-rooms", vars, ...(target === "before" ? { dir: BEFORE } : {}) });
  return { pid: server.pid, url: server.url, output: server.output, stop: () => stopLocalServer(server) };
}

function publish(agent, url, room, body) {
  return new Promise((resolve) => {
    const started = performance.now();
    const req = request(`${url}/rooms/${room}/publish`, { method: "POST", agent, headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) } }, (res) => {
      res.resume();
      res.on("end", () => resolve({ status: res.statusCode, ms: performance.now() - started }));
      res.on("error", (error) => resolve({ error: error.code ?? error.message, ms: performance.now() - started }));
    });
    req.setTimeout(30_000, () => req.destroy(Object.assign(new Error("timeout"), { code: "client timeout (30 s)" })));
    req.on("error", (error) => resolve({ error: error.code ?? error.message, ms: performance.now() - started }));
    req.end(body);
  });
}

/** CPU so far, or undefined once the process is gone (a server that died mid-phase is a finding, not a crash of this script). */
function cpuOf(pid) {
  try {
    return cpuMs(pid);
  } catch {
    return undefined;
  }
}

const percentile = (sorted, q) => Math.round((sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0) * 10) / 10;

/**
 * Descriptors, memory mappings and RSS of the server every second: what it
 * held when it answered its last publish. Mappings, because every SQLite
 * database maps its WAL index and the kernel allows a process
 * /proc/sys/vm/max_map_count of them.
 */
function watch(pid) {
  const seen = { samples: 0, peakFds: 0, peakMaps: 0, peakRssMb: 0, maxMapCount: Number(readFileSync("/proc/sys/vm/max_map_count", "utf8")), last: null };
  const timer = setInterval(() => {
    try {
      const sample = { fds: readdirSync(`/proc/${pid}/fd`).length, maps: readFileSync(`/proc/${pid}/maps`, "utf8").split("\n").length - 1, rssMb: Math.round(rssMb(pid)) };
      seen.samples++;
      seen.peakFds = Math.max(seen.peakFds, sample.fds);
      seen.peakMaps = Math.max(seen.peakMaps, sample.maps);
      seen.peakRssMb = Math.max(seen.peakRssMb, sample.rssMb);
      seen.last = sample;
    } catch {
      // Gone: the last sample stands.
    }
  }, 1000);
  return { seen, stop: () => clearInterval(timer) };
}

/** Publishes into `rooms` with `inFlight` at once; CPU and outcomes of the whole phase. */
async function phase(server, rooms, inFlight, limitMs = Infinity) {
  const watcher = watch(server.pid);
  const agent = new Agent({ keepAlive: true, maxSockets: inFlight });
  const statuses = {};
  const errors = {};
  const ms = [];
  const cpu0 = cpuOf(server.pid);
  const t0 = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < rooms.length && performance.now() - t0 < limitMs) {
        const room = rooms[next++];
        const r = await publish(agent, server.url, room, `{"room":"${room}"}`);
        ms.push(r.ms);
        if (r.error) errors[r.error] = (errors[r.error] ?? 0) + 1;
        else statuses[r.status] = (statuses[r.status] ?? 0) + 1;
      }
    }),
  );
  const wallMs = performance.now() - t0;
  watcher.stop();
  const cpu1 = cpuOf(server.pid);
  const cpu = cpu0 === undefined || cpu1 === undefined ? undefined : cpu1 - cpu0;
  agent.destroy();
  ms.sort((a, b) => a - b);
  const answered = Object.values(statuses).reduce((a, b) => a + b, 0);
  return {
    publishes: ms.length,
    answered,
    statuses,
    connectionErrors: errors,
    seconds: Math.round(wallMs) / 1000,
    perSecond: Math.round(ms.length / (wallMs / 1000)),
    serverAlive: cpu1 !== undefined,
    server: watcher.seen,
    serverCpuPerPublishUs: cpu === undefined ? null : Math.round((cpu * 1000) / Math.max(1, ms.length)),
    serverCpuPlusMinusUs: Math.round((20 * 1000) / Math.max(1, ms.length)),
    latencyMs: { p50: percentile(ms, 0.5), p99: percentile(ms, 0.99), max: percentile(ms, 1) },
  };
}

const results = [];
for (const target of Array.from({ length: ROUNDS }, () => TARGETS).flat()) {
  const server = await start(target);
  const tag = Math.random().toString(36).slice(2, 8);
  // Code paths compiled before anything is measured: a few rooms that are not counted.
  await phase(server, Array.from({ length: 50 }, (_, i) => `warm-${tag}-${i}`), 1);
  const rooms = Array.from({ length: FIRST }, (_, i) => `first-${tag}-${i}`);
  const first = await phase(server, rooms, 1);
  const again = await phase(server, rooms, 1);
  const burstRooms = Array.from({ length: BURST }, (_, i) => `burst-${tag}-${i}`);
  const burst = await phase(server, burstRooms, IN_FLIGHT, BURST_LIMIT_MS);
  await sleep(1000);
  // What the server said (the tail of its output: the burst is the last thing it did), beyond its usual lines.
  const lines = server.output().split("\n");
  const log = lines.filter((l) => /error|fail|abort|overload|exceed|refus|reset|kill|timeout|exited|signal/i.test(l));
  const result = {
    serverTail: burst.serverAlive ? undefined : lines.slice(-30), target, gate: target === "ours" || target === "before" ? GATE : "none", age: AGE, first, again, firstPublishExtraCpuUs: first.serverCpuPerPublishUs - again.serverCpuPerPublishUs, burst, burstLogLines: log.length, burstLogSample: [...new Set(log.map((l) => l.slice(0, 400)))].slice(0, 12) };
  results.push(result);
  console.log(JSON.stringify(result));
  await server.stop();
  await sleep(1000);
}
console.error(
  ["target        first: CPU/publish  p50 ms   warm: CPU/publish  p50 ms   first publish extra   burst: answered  statuses  connection errors  s"]
    .concat(
      results.map(
        (r) =>
          `${r.target.padEnd(12)}  ${`${r.first.serverCpuPerPublishUs} ± ${r.first.serverCpuPlusMinusUs} µs`.padStart(18)}  ${String(r.first.latencyMs.p50).padStart(6)}  ${`${r.again.serverCpuPerPublishUs} ± ${r.again.serverCpuPlusMinusUs} µs`.padStart(17)}  ${String(r.again.latencyMs.p50).padStart(6)}  ${`${r.firstPublishExtraCpuUs} µs`.padStart(19)}   ${`${r.burst.answered}/${r.burst.publishes}`.padStart(14)}  ${JSON.stringify(r.burst.statuses)}  ${JSON.stringify(r.burst.connectionErrors)}  ${r.burst.seconds}`,
      ),
    )
    .join("\n"),
);
