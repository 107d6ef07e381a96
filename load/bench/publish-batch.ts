import { defineBench, log } from "../src/kit/bench";
import { httpLoad, jsonPost, type HttpRequestSpec } from "../src/kit/http-load";
import { cpuMs } from "../src/kit/proc";
import { rotation } from "../src/kit/rounds";
import { Server } from "../src/kit/server";
import { sleep } from "../src/kit/time";
import { spreadOf } from "../src/stats/percentile";

/** Requests of `k` messages each, for k different rooms, cycling through all the rooms. */
function requestsOf(k: number, rooms: number, tag: string): HttpRequestSpec[] {
  const names = Array.from({ length: rooms }, (_, i) => `batch-${tag}-${i}`);
  if (k === 1) return names.map((room, i) => jsonPost(`/rooms/${room}/publish`, `{"n":${i}}`));
  return Array.from({ length: rooms }, (_, i) => jsonPost("/publish", { messages: Array.from({ length: k }, (_, j) => ({ room: names[(i * k + j) % rooms], data: { n: i * k + j } })) }));
}

export default defineBench({
  name: "publish-batch",
  title: "what one HTTP request carrying messages for several rooms saves per message (bare workerd baseline)",
  about: `What one HTTP request carrying messages for several rooms would save per message, measured on the bare workerd
baseline (its POST /publish takes {"messages":[{"room","data"}]} and answers each with its own seq; one RPC per
room): publishes into --rooms rooms with no subscribers, one message per request (POST /rooms/{room}/publish)
against batches of k messages for k different rooms, by autocannon, in interleaved rounds. Server CPU per
message is workerd's utime+stime over the run ÷ messages answered. Build first: npm run build.`,
  options: {
    batches: { default: "1,10,20", help: "messages per request, each a run" },
    targets: { default: "bare,bare-durable", help: "bare, bare-durable" },
    rooms: { default: "100", help: "rooms" },
    connections: { default: "20", help: "keep-alive connections" },
    seconds: { default: "8", help: "seconds measured per run (after a 2 s warm-up)" },
    rounds: { default: "3", help: "interleaved rounds" },
    port: { default: "18741", help: "port of each server in turn" },
  },
  async run(args) {
    const rooms = args.int("rooms", { min: 1 });
    const connections = args.int("connections", { min: 1 });
    const seconds = args.number("seconds", { min: 1 });
    const rounds = args.int("rounds", { min: 1 });
    const pairs = args.list("targets").flatMap((target) => args.numbers("batches", { min: 1, integer: true }).map((k) => ({ target, k })));
    const results: Array<{ target: string; batch: number; messagesPerSecond: number; serverCpuPerMessageUs: number; requestP50Ms: number }> = [];
    for (let round = 0; round < rounds; round++) {
      for (const { target, k } of rotation(pairs, round)) {
        const server = await Server.start({ kind: target, port: args.int("port") });
        const requests = requestsOf(k, rooms, Math.random().toString(36).slice(2, 8));
        await httpLoad(server.url, connections, 2, requests);
        await sleep(300);
        const cpu0 = cpuMs(server.pid);
        const t0 = performance.now();
        const load = await httpLoad(server.url, connections, seconds, requests);
        const wallMs = performance.now() - t0;
        const cpu = cpuMs(server.pid) - cpu0;
        const messages = load.ok * k;
        const run = { round: round + 1, target, batch: k, requests: load.ok, messages, failed: load.non2xx + load.errors, messagesPerSecond: Math.round(messages / (wallMs / 1000)), serverCpuPerMessageUs: Math.round((cpu * 1000) / messages), plusMinusUs: Math.round(20_000 / messages), requestP50Ms: load.latencyMs.p50 };
        results.push(run);
        console.log(JSON.stringify(run));
        await server.stop();
        await sleep(500);
      }
    }
    log(`median of ${rounds} interleaved rounds (lowest-highest); ${rooms} rooms, no subscribers, ${connections} connections, ${seconds} s`);
    log("target        messages/request  messages/s               server CPU per message     request p50 ms");
    for (const { target, k } of pairs) {
      const runs = results.filter((r) => r.target === target && r.batch === k);
      const span = (pick: (r: (typeof runs)[number]) => number): string => {
        const s = spreadOf(runs.map(pick));
        return `${s.median} (${s.low}-${s.high})`;
      };
      log(`${target.padEnd(12)}  ${String(k).padStart(16)}  ${span((r) => r.messagesPerSecond).padStart(22)}  ${`${span((r) => r.serverCpuPerMessageUs)} µs`.padStart(25)}  ${span((r) => r.requestP50Ms).padStart(16)}`);
    }
  },
});
