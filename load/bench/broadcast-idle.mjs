#!/usr/bin/env node
// A broadcast to rooms without sockets (an explicit list of rooms nobody is in, created by the broadcast),
// at the documented maximum of BROADCAST_MAX_ROOMS (10,000), on the local server: how long it takes, the
// server's memory (workerd RSS, sampled every 200 ms), what the rooms answered, SQLITE_NOMEM lines in the
// server's output, and what someone else sees meanwhile (a probe that publishes into a live room and reads
// its history every 250 ms: statuses and latency); then the same request again with the same key (a retry).
// docs/coordinator.md, "Benchmark: 10,000 rooms without sockets", holds the figures and these commands.
//
//   npm run build
//   flock /tmp/bench.lock node load/bench/broadcast-idle.mjs [--rooms 10000] [--port 18360]
//        [--compare DIR] [--server-var K=V ...] [--max-seconds 1500]
//
// --compare DIR runs the same first against the local server of another checkout (built: node
// tools/build-worker.mjs in DIR), then against this one: before and after a change, in one invocation.

import { readFileSync } from "node:fs";
import WebSocket from "ws";
import { cpuMs, rssMb, startLocalServer, stopAllLocalServers, stopLocalServer } from "./local-server.mjs";

const argv = process.argv.slice(2);
const option = (name, fallback) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : fallback;
};
const ROOMS = Number(option("rooms", "10000"));
const PORT = Number(option("port", "18360"));
const COMPARE = option("compare", undefined);
const MAX_SECONDS = Number(option("max-seconds", "1500"));
const serverVars = Object.fromEntries(
  argv.flatMap((arg, i) => (arg === "--server-var" ? [argv[i + 1].split("=")] : [])).map(([k, ...v]) => [k, v.join("=")]),
);
if (!(ROOMS >= 1 && ROOMS <= 10_000)) throw new Error("--rooms takes 1 to 10,000 (BROADCAST_MAX_ROOMS at most)");

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const hardStop = setTimeout(async () => {
  console.error(`gave up after ${MAX_SECONDS} s`);
  await stopAllLocalServers();
  process.exit(2);
}, MAX_SECONDS * 1000);

const pct = (sorted, p) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] : null);

/** One request's status (0: no answer at all) and how long it took. */
async function timed(url, init) {
  const t0 = performance.now();
  try {
    const res = await fetch(url, { ...init, signal: AbortSignal.timeout(60_000) });
    await res.text();
    return { status: res.status, ms: performance.now() - t0 };
  } catch {
    return { status: 0, ms: performance.now() - t0 };
  }
}

async function broadcast(server, rooms, key) {
  const t0 = performance.now();
  const res = await fetch(`${server.url}/broadcast`, {
    method: "POST",
    headers: { "content-type": "application/json", "idempotency-key": key },
    body: JSON.stringify({ data: { notice: key }, rooms }),
  });
  const answer = await res.json();
  return { status: res.status, ms: Math.round(performance.now() - t0), answer: { ...answer, failed: undefined } };
}

async function run(label, dir) {
  const server = await startLocalServer({ port: PORT, dir, label: "broadcast-idle", vars: { BROADCAST_MAX_ROOMS: "10000", ...serverVars } });
  let nomem = 0;
  const countNomem = (d) => (nomem += (String(d).match(/SQLITE_NOMEM/g) ?? []).length);
  server.child.stdout.on("data", countNomem);
  server.child.stderr.on("data", countNomem);
  // Someone else: a reader in a live room, and a probe publishing there and reading its history.
  const reader = new WebSocket(`${server.wsUrl}/rooms/bi-live/ws`);
  await new Promise((resolve, reject) => (reader.once("open", resolve), reader.once("error", reject)));
  reader.on("message", (data) => {
    const text = String(data);
    if (text === "pong") return;
    for (const e of [].concat(JSON.parse(text))) if (e.type === "message") reader.send(JSON.stringify({ type: "ack", seq: e.seq, tag: e.tag }));
  });
  const baseMb = rssMb(server.pid);
  let peakMb = baseMb;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      peakMb = Math.max(peakMb, rssMb(server.pid));
      await sleep(200);
    }
  })();
  const probes = { publish: [], history: [] };
  let probing = true;
  const prober = (async () => {
    for (let i = 0; probing; i++) {
      probes.publish.push(await timed(`${server.url}/rooms/bi-live/publish`, { method: "POST", body: String(i) }));
      probes.history.push(await timed(`${server.url}/rooms/bi-live/messages?limit=10`));
      await sleep(250);
    }
  })();

  const rooms = Array.from({ length: ROOMS }, (_, i) => `bi-${String(i).padStart(5, "0")}`);
  const cpu0 = cpuMs(server.pid);
  const first = await broadcast(server, rooms, "bench-1");
  const cpuFirst = cpuMs(server.pid) - cpu0;
  console.error(`${label}: first ${first.ms} ms ${JSON.stringify(first.answer)}`);
  const retry = await broadcast(server, rooms, "bench-1");
  console.error(`${label}: retry ${retry.ms} ms ${JSON.stringify(retry.answer)}`);
  probing = false;
  await prober;
  sampling = false;
  await sampler;
  reader.terminate();
  const summarize = (list) => {
    const ms = list.map((p) => p.ms).sort((a, b) => a - b);
    return { count: list.length, not200: list.filter((p) => p.status !== 200).length, p50Ms: Math.round(pct(ms, 50)), p99Ms: Math.round(pct(ms, 99)), maxMs: Math.round(ms.at(-1) ?? NaN) };
  };
  const result = {
    label,
    rooms: ROOMS,
    first,
    retry,
    serverCpuFirstMs: Math.round(cpuFirst),
    rssBaseMb: Math.round(baseMb),
    rssPeakMb: Math.round(peakMb),
    sqliteNomemLines: nomem,
    probePublish: summarize(probes.publish),
    probeHistory: summarize(probes.history),
  };
  await stopLocalServer(server);
  return result;
}

const results = [];
if (COMPARE) results.push(await run(`before (${COMPARE})`, COMPARE));
results.push(await run("this checkout", undefined));
clearTimeout(hardStop);
console.log(JSON.stringify({ bench: "broadcast-idle", command: process.argv.slice(1), loadavg: readFileSync("/proc/loadavg", "utf8").trim(), results }, null, 2));
process.exit(0);
