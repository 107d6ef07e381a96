#!/usr/bin/env node
// Where a handshake's microseconds go: ours against the bare workerd baseline and PartyServer. Each target's
// workerd runs with V8's --perf-basic-prof (profiled-servers.mjs); a warm-up opens and drops 500 sockets, then
// `perf record -g` samples workerd's on-CPU time (cpu-clock) while N sockets open into one room (below
// ROOM_SHARD_SOCKETS, so ours holds them all in one object as the others do), at most 64 handshakes in flight.
// Samples are split into steps (perf-steps.mjs perfSteps) and by JavaScript function (perfFunctions); µs per
// handshake are each share of workerd's CPU per handshake (utime+stime over the same window ÷ sockets opened).
// Targets run one after another, in rounds (the order rotates each round); the figures printed are each round's.
//
//   npm run build && node load/build.mjs
//   flock /tmp/bench.lock node load/bench/handshake-profile.mjs [--targets ours,bare,partyserver] [--sockets 2800]
//        [--rounds 2] [--port 18741]
//
// Needs `perf` (linux-perf). Loopback only; every server is stopped at the end.

import WebSocket from "ws";
import { perfFunctions, perfSteps } from "./perf-steps.mjs";
import { sampleWhile, startBare, startOurs, startPartyserver } from "./profiled-servers.mjs";

const argv = process.argv.slice(2);
const option = (name, fallback) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : fallback;
};
const TARGETS = option("targets", "ours,bare,partyserver").split(",");
const SOCKETS = Number(option("sockets", "2800"));
const ROUNDS = Number(option("rounds", "2"));
const PORT = Number(option("port", "18741"));
const IN_FLIGHT = 64;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const START = { ours: () => startOurs(PORT), bare: () => startBare(PORT, false), partyserver: () => startPartyserver(PORT) };

/** Opens `count` sockets into `room`, IN_FLIGHT at a time, each once its first frame (the welcome) arrived. */
async function open(room, count) {
  const sockets = [];
  let next = 0;
  const worker = async () => {
    while (next < count) {
      next += 1;
      const ws = new WebSocket(`ws://127.0.0.1:${PORT}/rooms/${room}/ws`, { perMessageDeflate: false });
      await new Promise((resolve, reject) => {
        ws.once("message", resolve);
        ws.once("error", reject);
      });
      sockets.push(ws);
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
  return sockets;
}

const results = [];
for (let round = 0; round < ROUNDS; round++) {
  for (let k = 0; k < TARGETS.length; k++) {
    const target = TARGETS[(k + round) % TARGETS.length];
    if (!START[target]) throw new Error(`unknown target ${target}: ours, bare, partyserver`);
    const server = await START[target]();
    const tag = Math.random().toString(36).slice(2, 8);
    // The runtime's and the bundle's code paths warm, then a fresh room.
    for (const ws of await open(`warm-${tag}`, 500)) ws.terminate();
    await sleep(1500);
    const { text, cpuMs: cpu, wallMs, answer: sockets, perfError: perfErr } = await sampleWhile(server.pid, () => open(`profile-${tag}`, SOCKETS), 1999);
    const us = (cpu * 1000) / SOCKETS;
    const steps = perfSteps(text, { bundle: server.bundle });
    const functions = perfFunctions(text, { bundle: server.bundle, top: 25 });
    const result = {
      round: round + 1,
      target,
      sockets: SOCKETS,
      handshakesPerSecond: Math.round(SOCKETS / (wallMs / 1000)),
      serverCpuPerHandshakeUs: Math.round(us),
      serverCpuPlusMinusUs: Math.round(20_000 / SOCKETS),
      samples: steps.samples,
      steps: steps.steps.map((s) => ({ step: s.step, us: Math.round(s.share * us * 10) / 10, ownUs: Math.round((s.own / Math.max(1, steps.samples)) * us * 10) / 10 })),
      functions: functions.functions.map((f) => ({ fn: f.fn, inclusiveUs: Math.round(f.inclusive * us * 10) / 10, innermostUs: Math.round(f.innermost * us * 10) / 10 })),
      ...(steps.samples === 0 ? { perfError: perfErr.slice(-500) } : {}),
    };
    results.push(result);
    console.log(JSON.stringify(result));
    for (const ws of sockets) ws.terminate();
    await server.stop();
    await sleep(1000);
  }
}
for (const r of results) {
  console.error(`\nround ${r.round}, ${r.target}: ${r.sockets} handshakes at ${r.handshakesPerSecond}/s, ${r.serverCpuPerHandshakeUs} ± ${r.serverCpuPlusMinusUs} µs of workerd CPU each, ${r.samples} samples`);
  for (const s of r.steps.filter((x) => x.us >= 3)) console.error(`  ${s.step.padEnd(58)} ${`${s.us} µs`.padStart(9)}  (its own JS ${s.ownUs} µs)`);
  console.error("  by function, inclusive (and innermost):");
  for (const f of r.functions.filter((x) => x.inclusiveUs >= 3)) console.error(`    ${`${f.inclusiveUs} µs`.padStart(9)} (${f.innermostUs})  ${f.fn}`);
}
