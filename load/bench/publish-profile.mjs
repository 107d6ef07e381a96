#!/usr/bin/env node
// Where a publish's microseconds go, ours (durable rooms, or ephemeral ones)
// against the bare workerd baseline and PartyServer (profiled-servers.mjs):
// each target's workerd is started with V8's --perf-basic-prof, rooms get a
// few subscribers, a closed-loop generator publishes into them over HTTP, and
// `perf record -g` samples workerd's on-CPU time (cpu-clock) while it does.
// The samples are split into steps by perf-steps.mjs; µs per publish are each
// step's share of workerd's CPU per publish (utime+stime over the same
// window ÷ publishes answered).
//
//   npm run build && node load/build.mjs
//   flock /tmp/bench.lock node load/bench/publish-profile.mjs [--targets ours,ephemeral,bare,bare-durable,partyserver]
//        [--rooms 100] [--sockets 1] [--connections 20] [--seconds 10] [--port 18731]
//
// Needs `perf` (linux-perf). Loopback only; every server is stopped at the end.

import WebSocket from "ws";
import { runHttpLoad } from "./http-load.mjs";
import { perfSteps } from "./perf-steps.mjs";
import { sampleWhile, startBare, startOurs, startPartyserver } from "./profiled-servers.mjs";

const argv = process.argv.slice(2);
const option = (name, fallback) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : fallback;
};
const TARGETS = option("targets", "ours,bare,bare-durable").split(",");
const ROOMS = Number(option("rooms", "100"));
const SOCKETS = Number(option("sockets", "1"));
const CONNECTIONS = Number(option("connections", "20"));
const SECONDS = Number(option("seconds", "10"));
const PORT = Number(option("port", "18731"));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const START = {
  ours: () => startOurs(PORT),
  // Every room of this script is named profile-...: the rule makes them all ephemeral (docs/history.md#ephemeral-rooms).
  ephemeral: () => startOurs(PORT, { HISTORY_RULES: '[{"prefix":"profile-","store":false}]' }),
  bare: () => startBare(PORT, false),
  "bare-durable": () => startBare(PORT, true),
  partyserver: () => startPartyserver(PORT),
};
for (const target of TARGETS) if (!START[target]) throw new Error(`unknown target ${target}: ${Object.keys(START).join(", ")}`);

async function subscribe(rooms) {
  const sockets = [];
  for (const room of rooms) {
    for (let i = 0; i < SOCKETS; i++) {
      const ws = new WebSocket(`ws://127.0.0.1:${PORT}/rooms/${room}/ws`, { perMessageDeflate: false });
      await new Promise((resolve, reject) => {
        ws.once("message", resolve);
        ws.once("error", reject);
      });
      sockets.push(ws);
    }
  }
  return sockets;
}

const results = [];
for (const target of TARGETS) {
  const server = await START[target]();
  const tag = Math.random().toString(36).slice(2, 8);
  const rooms = Array.from({ length: ROOMS }, (_, i) => `profile-${tag}-${i}`);
  const requests = rooms.map((room, i) => ({ method: "POST", path: `/rooms/${room}/publish`, body: `{"n":${i},"text":"a small message"}`, headers: { "content-type": "application/json" } }));
  const url = `http://127.0.0.1:${PORT}`;
  const sockets = await subscribe(rooms);
  // Every room exists and the hot paths are optimised before anything is sampled.
  await runHttpLoad({ url, connections: CONNECTIONS, seconds: 3, requests });
  await sleep(500);
  const { text, cpuMs: cpu, wallMs, answer: load, perfError: perfErr } = await sampleWhile(server.pid, () => runHttpLoad({ url, connections: CONNECTIONS, seconds: SECONDS, requests }));
  const ok = load.requests.total - load.non2xx - load.errors;
  const cpuPerPublishUs = (cpu * 1000) / ok;
  const profile = perfSteps(text, { bundle: server.bundle });
  const result = {
    target,
    rooms: ROOMS,
    socketsPerRoom: SOCKETS,
    connections: CONNECTIONS,
    publishes: ok,
    failed: load.non2xx + load.errors,
    publishesPerSecond: Math.round(ok / (wallMs / 1000)),
    serverCpuPerPublishUs: Math.round(cpuPerPublishUs),
    serverCpuPlusMinusUs: Math.round(20_000 / ok),
    serverCorePercent: Math.round((cpu / wallMs) * 100),
    samples: profile.samples,
    steps: profile.steps.map((s) => ({ ...s, usPerPublish: Math.round(s.share * cpuPerPublishUs * 10) / 10, ownUs: Math.round((s.own / profile.samples) * cpuPerPublishUs * 10) / 10 })),
    ...(profile.samples === 0 ? { perfError: perfErr.slice(-500) } : {}),
  };
  results.push(result);
  console.log(JSON.stringify(result));
  for (const ws of sockets) ws.terminate();
  await server.stop();
  await sleep(1000);
}
for (const r of results) {
  console.error(`\n${r.target}: ${r.publishesPerSecond} publishes/s into ${r.rooms} rooms of ${r.socketsPerRoom} socket(s), ${r.serverCpuPerPublishUs} ± ${r.serverCpuPlusMinusUs} µs of workerd CPU each (${r.serverCorePercent}% of a core), ${r.samples} samples`);
  for (const s of r.steps.filter((x) => x.share >= 0.005)) {
    console.error(`  ${s.step.padEnd(52)} ${`${(s.share * 100).toFixed(1)}%`.padStart(6)}  ${`${s.usPerPublish} µs`.padStart(9)}  (its own JS ${s.ownUs} µs)`);
  }
}
