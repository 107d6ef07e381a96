import WebSocket from "ws";
import { defineBench, log } from "../src/kit/bench";
import { interleaved } from "../src/kit/rounds";
import { sleep } from "../src/kit/time";
import { perfFunctions, perfSteps } from "./perf-steps";
import { PROFILED_TARGETS, sampleWhile, startProfiled } from "./profiled-servers";

/** Handshakes in flight at once. */
const IN_FLIGHT = 64;

/** Opens `count` sockets into `room` on `port`, IN_FLIGHT at a time, each once its first frame (the welcome) arrived. */
async function openSockets(port: number, room: string, count: number): Promise<WebSocket[]> {
  const sockets: WebSocket[] = [];
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < count) {
      next += 1;
      const ws = new WebSocket(`ws://127.0.0.1:${port}/rooms/${room}/ws`, { perMessageDeflate: false });
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

interface HandshakeProfile {
  round: number;
  target: string;
  sockets: number;
  handshakesPerSecond: number;
  serverCpuPerHandshakeUs: number;
  serverCpuPlusMinusUs: number;
  samples: number;
  steps: Array<{ step: string; us: number; ownUs: number }>;
  functions: Array<{ fn: string; inclusiveUs: number; innermostUs: number }>;
  perfError?: string;
}

export default defineBench({
  name: "handshake-profile",
  title: "where a handshake's microseconds go, ours against the bare workerd baseline and PartyServer (perf record)",
  about: `Each target's workerd runs with V8's --perf-basic-prof (load/bench/profiled-servers.ts); a warm-up opens and drops
500 sockets, then perf record -g samples workerd's on-CPU time (cpu-clock) while N sockets open into one room (below
ROOM_SHARD_SOCKETS, so ours holds them all in one object as the others do), ${IN_FLIGHT} handshakes in flight. Samples
are split into steps and by JavaScript function (load/bench/perf-steps.ts); µs per handshake are each share of
workerd's CPU per handshake (utime+stime over the same window ÷ sockets opened). Targets run in interleaved rounds;
the figures printed are each round's. Needs perf (linux-perf). Build first: npm run build && node load/build.mjs;
run it under flock /tmp/bench.lock.`,
  options: {
    targets: { default: "ours,bare,partyserver", help: `of ${PROFILED_TARGETS.join(", ")}` },
    sockets: { default: "2800", help: "sockets opened while sampling" },
    rounds: { default: "2", help: "interleaved rounds" },
    port: { default: "18741", help: "port of each target in turn" },
  },
  async run(args) {
    const port = args.int("port", { min: 1, max: 65535 });
    const count = args.int("sockets", { min: 1 });
    const targets = args.list("targets");
    for (const target of targets) if (!(PROFILED_TARGETS as readonly string[]).includes(target)) throw new Error(`unknown target ${target}: one of ${PROFILED_TARGETS.join(", ")}`);
    const ran = await interleaved(targets, args.int("rounds", { min: 1, max: 20 }), async (target, round): Promise<HandshakeProfile> => {
      const server = await startProfiled(target, port, "profile-");
      try {
        const tag = Math.random().toString(36).slice(2, 8);
        // The runtime's and the bundle's code paths warm, then a fresh room.
        for (const ws of await openSockets(port, `warm-${tag}`, 500)) ws.terminate();
        await sleep(1500);
        const sampled = await sampleWhile(server.pid, () => openSockets(port, `profile-${tag}`, count), 1999);
        const us = (sampled.cpuMs * 1000) / count;
        const steps = perfSteps(sampled.text, { bundle: server.bundle });
        const functions = perfFunctions(sampled.text, { bundle: server.bundle, top: 25 });
        for (const ws of sampled.answer) ws.terminate();
        const result: HandshakeProfile = {
          round: round + 1,
          target,
          sockets: count,
          handshakesPerSecond: Math.round(count / (sampled.wallMs / 1000)),
          serverCpuPerHandshakeUs: Math.round(us),
          // CPU time is counted in 10 ms ticks: that much over the whole run.
          serverCpuPlusMinusUs: Math.round(20_000 / count),
          samples: steps.samples,
          steps: steps.steps.map((s) => ({ step: s.step, us: Math.round(s.share * us * 10) / 10, ownUs: Math.round((s.own / Math.max(1, steps.samples)) * us * 10) / 10 })),
          functions: functions.functions.map((f) => ({ fn: f.fn, inclusiveUs: Math.round(f.inclusive * us * 10) / 10, innermostUs: Math.round(f.innermost * us * 10) / 10 })),
          ...(steps.samples === 0 ? { perfError: sampled.perfError } : {}),
        };
        console.log(JSON.stringify(result));
        return result;
      } finally {
        await server.stop();
        await sleep(1000);
      }
    });
    for (const result of [...ran.values()].flat().sort((a, b) => a.round - b.round)) {
      log(`\nround ${result.round}, ${result.target}: ${result.sockets} handshakes at ${result.handshakesPerSecond}/s, ${result.serverCpuPerHandshakeUs} ± ${result.serverCpuPlusMinusUs} µs of workerd CPU each, ${result.samples} samples`);
      for (const s of result.steps.filter((x) => x.us >= 3)) log(`  ${s.step.padEnd(58)} ${`${s.us} µs`.padStart(9)}  (its own JS ${s.ownUs} µs)`);
      log("  by function, inclusive (and innermost):");
      for (const f of result.functions.filter((x) => x.inclusiveUs >= 3)) log(`    ${`${f.inclusiveUs} µs`.padStart(9)} (${f.innermostUs})  ${f.fn}`);
    }
  },
});
