#!/usr/bin/env node
// What one HTTP request carrying messages for several rooms would save per
// message, measured on the bare workerd baseline (its POST /publish takes
// {"messages":[{"room","data"}]} and answers each with its own seq; one RPC
// per room): publishes into --rooms rooms with no subscribers, one message
// per request (POST /rooms/{room}/publish) against batches of k messages for
// k different rooms, in interleaved rounds. Server CPU per message is
// workerd's utime+stime over the run ÷ messages answered.
//
//   npm run build && node load/build.mjs
//   flock /tmp/bench.lock node load/bench/publish-batch.mjs [--batches 1,10,20] [--targets bare,bare-durable]
//        [--rooms 100] [--connections 20] [--seconds 8] [--rounds 3] [--port 18741]

import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runHttpLoad } from "./http-load.mjs";
import { cpuMs, ROOT } from "./local-server.mjs";

const argv = process.argv.slice(2);
const option = (name, fallback) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : fallback;
};
const BATCHES = option("batches", "1,10,20").split(",").map(Number);
const TARGETS = option("targets", "bare,bare-durable").split(",");
const ROOMS = Number(option("rooms", "100"));
const CONNECTIONS = Number(option("connections", "20"));
const SECONDS = Number(option("seconds", "8"));
const ROUNDS = Number(option("rounds", "3"));
const PORT = Number(option("port", "18741"));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// Servers must not outlive this script, whatever ends it (one listener for all of them).
const running = new Set();
process.on("exit", () => running.forEach((child) => child.kill("SIGKILL")));

async function startBare(durable) {
  const dir = mkdtempSync(join(tmpdir(), "publish-batch-"));
  const child = spawn(process.execPath, [join(ROOT, "load/dist/bare-server.js"), "--port", String(PORT), "--data", dir, ...(durable ? ["--durable"] : [])], { stdio: ["ignore", "pipe", "inherit"] });
  running.add(child);
  child.once("exit", () => running.delete(child));
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  const deadline = Date.now() + 30_000;
  while (!(/workerd pid \d+/.test(out) && (await fetch(`http://127.0.0.1:${PORT}/healthz`).then((r) => r.ok, () => false)))) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`bare baseline did not start:\n${out}`);
    await sleep(100);
  }
  return {
    pid: Number(/workerd pid (\d+)/.exec(out)[1]),
    stop: async () => {
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGTERM");
      await Promise.race([exited, sleep(5000)]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Requests of `k` messages each, for k different rooms, cycling through all the rooms. */
function requestsOf(k, tag) {
  const rooms = Array.from({ length: ROOMS }, (_, i) => `batch-${tag}-${i}`);
  if (k === 1) return rooms.map((room, i) => ({ method: "POST", path: `/rooms/${room}/publish`, body: `{"n":${i}}`, headers: { "content-type": "application/json" } }));
  return Array.from({ length: ROOMS }, (_, i) => ({
    method: "POST",
    path: "/publish",
    body: JSON.stringify({ messages: Array.from({ length: k }, (_, j) => ({ room: rooms[(i * k + j) % ROOMS], data: { n: i * k + j } })) }),
    headers: { "content-type": "application/json" },
  }));
}

const results = [];
const pairs = TARGETS.flatMap((target) => BATCHES.map((k) => ({ target, k })));
for (let round = 0; round < ROUNDS; round++) {
  for (let n = 0; n < pairs.length; n++) {
    const { target, k } = pairs[(n + round) % pairs.length];
    const server = await startBare(target === "bare-durable");
    const requests = requestsOf(k, Math.random().toString(36).slice(2, 8));
    await runHttpLoad({ url: `http://127.0.0.1:${PORT}`, connections: CONNECTIONS, seconds: 2, requests });
    await sleep(300);
    const cpu0 = cpuMs(server.pid);
    const t0 = performance.now();
    const load = await runHttpLoad({ url: `http://127.0.0.1:${PORT}`, connections: CONNECTIONS, seconds: SECONDS, requests });
    const wallMs = performance.now() - t0;
    const cpu = cpuMs(server.pid) - cpu0;
    const okRequests = load.requests.total - load.non2xx - load.errors;
    const messages = okRequests * k;
    results.push({ round: round + 1, target, batch: k, requests: okRequests, messages, failed: load.non2xx + load.errors, messagesPerSecond: Math.round(messages / (wallMs / 1000)), serverCpuPerMessageUs: Math.round((cpu * 1000) / messages), plusMinusUs: Math.round(20_000 / messages), requestP50Ms: load.latency.p50 });
    console.log(JSON.stringify(results.at(-1)));
    await server.stop();
    await sleep(500);
  }
}
const median = (v) => {
  const s = [...v].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
console.error(`median of ${ROUNDS} interleaved rounds (lowest-highest); ${ROOMS} rooms, no subscribers, ${CONNECTIONS} connections, ${SECONDS} s`);
console.error("target        messages/request  messages/s               server CPU per message     request p50 ms");
for (const { target, k } of pairs) {
  const runs = results.filter((r) => r.target === target && r.batch === k);
  const span = (pick) => `${median(runs.map(pick))} (${Math.min(...runs.map(pick))}-${Math.max(...runs.map(pick))})`;
  console.error(`${target.padEnd(12)}  ${String(k).padStart(16)}  ${span((r) => r.messagesPerSecond).padStart(22)}  ${`${span((r) => r.serverCpuPerMessageUs)} µs`.padStart(25)}  ${span((r) => r.requestP50Ms).padStart(16)}`);
}
