import { readFileSync } from "node:fs";
import { Agent, request } from "node:http";
import { readChoice } from "../src/kit/args";
import { defineBench, log } from "../src/kit/bench";
import { countFds, countMaps, readCpuUs, readRssBytes } from "../src/kit/proc";
import { medianTable, interleaved, type MetricRow } from "../src/kit/rounds";
import { Server, type ServerSpec } from "../src/kit/server";
import { paced, sleep } from "../src/kit/time";
import { percentileOfSorted } from "../src/stats/percentile";

type Outcome = { status: number; ms: number } | { error: string; ms: number };

function publish(agent: Agent, url: string, room: string, body: string): Promise<Outcome> {
  return new Promise((resolve) => {
    const started = performance.now();
    const fail = (error: NodeJS.ErrnoException): void => resolve({ error: error.code ?? error.message, ms: performance.now() - started });
    const req = request(`${url}/rooms/${room}/publish`, { method: "POST", agent, headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) } }, (res) => {
      res.resume();
      res.on("end", () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - started }));
      res.on("error", fail);
    });
    req.setTimeout(30_000, () => req.destroy(Object.assign(new Error("timeout"), { code: "client timeout (30 s)" })));
    req.on("error", fail);
    req.end(body);
  });
}

/**
 * Descriptors, memory mappings and RSS of the server every second: what it held when it answered its last
 * publish. Mappings, because every SQLite database maps its WAL index and the kernel allows a process
 * /proc/sys/vm/max_map_count of them.
 */
function watch(pid: number): { seen: { samples: number; peakFds: number; peakMaps: number; peakRssMb: number; maxMapCount: number; last: unknown }; stop: () => void } {
  const seen = { samples: 0, peakFds: 0, peakMaps: 0, peakRssMb: 0, maxMapCount: Number(readFileSync("/proc/sys/vm/max_map_count", "utf8")), last: null as unknown };
  const timer = setInterval(() => {
    const rss = readRssBytes(pid);
    const maps = countMaps(pid);
    // Gone: the last sample stands.
    if (rss === undefined || maps === undefined) return;
    const sample = { fds: countFds(pid), maps, rssMb: Math.round(rss / 1048576) };
    seen.samples++;
    seen.peakFds = Math.max(seen.peakFds, sample.fds);
    seen.peakMaps = Math.max(seen.peakMaps, sample.maps);
    seen.peakRssMb = Math.max(seen.peakRssMb, sample.rssMb);
    seen.last = sample;
  }, 1000);
  return { seen, stop: () => clearInterval(timer) };
}

/** Publishes into `rooms` with `inFlight` at once; CPU and outcomes of the whole phase (a server that died mid-phase is a finding). */
async function phase(server: Server, rooms: string[], inFlight: number, limitMs = Infinity) {
  const watcher = watch(server.pid);
  const agent = new Agent({ keepAlive: true, maxSockets: inFlight });
  const statuses: Record<string, number> = {};
  const errors: Record<string, number> = {};
  const ms: number[] = [];
  const cpu0 = readCpuUs(server.pid);
  const t0 = performance.now();
  await paced(rooms.length, { concurrency: inFlight, stop: () => performance.now() - t0 >= limitMs }, async (i) => {
    const room = rooms[i] as string;
    const r = await publish(agent, server.url, room, `{"room":"${room}"}`);
    ms.push(r.ms);
    if ("error" in r) errors[r.error] = (errors[r.error] ?? 0) + 1;
    else statuses[r.status] = (statuses[r.status] ?? 0) + 1;
  });
  const wallMs = performance.now() - t0;
  watcher.stop();
  const cpu1 = readCpuUs(server.pid);
  const cpuMs = cpu0 === undefined || cpu1 === undefined ? undefined : (cpu1 - cpu0) / 1000;
  agent.destroy();
  ms.sort((a, b) => a - b);
  const at = (p: number): number => Math.round((percentileOfSorted(ms, p) || 0) * 10) / 10;
  return {
    publishes: ms.length,
    answered: Object.values(statuses).reduce((a, b) => a + b, 0),
    statuses,
    connectionErrors: errors,
    seconds: Math.round(wallMs) / 1000,
    perSecond: Math.round(ms.length / (wallMs / 1000)),
    serverAlive: cpu1 !== undefined,
    server: watcher.seen,
    serverCpuPerPublishUs: cpuMs === undefined ? null : Math.round((cpuMs * 1000) / Math.max(1, ms.length)),
    serverCpuPlusMinusUs: Math.round((20 * 1000) / Math.max(1, ms.length)),
    latencyMs: { p50: at(50), p99: at(99), max: at(100) },
  };
}

/** Figures of a burst that compare across rounds: the median of each is printed, with its spread. */
const BURST_METRICS: readonly MetricRow[] = [
  ["ok", "burst: answered 200", 0],
  ["otherStatuses", "burst: answered otherwise", 0],
  ["connectionErrors", "burst: connection errors", 0],
  ["errorLines", "server output: error lines", 0],
  ["perSecond", "burst: publishes/s", 0],
  ["cpuPerPublishUs", "burst: server CPU per publish (µs)", 0],
  ["p50", "burst: latency p50 (ms)", 0],
  ["p99", "burst: latency p99 (ms)", 0],
  ["peakRssMb", "burst: peak workerd RSS (MB)", 0],
  ["afterRssMb", "workerd RSS after (MB; --age: age + 12 s)", 0],
  ["firstExtraUs", "first publish's extra CPU (µs)", 0],
];

/** What the server printed that names a failure (its usual lines do not). */
const ERROR_LINE = /error|fail|abort|overload|exceed|refus|reset|kill|timeout|exited|signal|SQLITE_/i;

export default defineBench({
  name: "new-rooms",
  title: "what a room's first publish costs, and a burst of publishes into new rooms",
  about: `Against the local server (or the bare workerd baseline), each started fresh on 127.0.0.1 and stopped at the end:
1. first publish: --first new rooms published into one at a time (nothing else in flight), then the same rooms
   again (warm), each with a server CPU per publish (utime+stime over the phase ÷ publishes) and latency; the
   difference is the first publish's own cost (the room's storage created, its registration).
2. burst: --burst publishes, each into a room of its own, --in-flight at once on keep-alive connections; every
   publish ends in an HTTP answer (counted by status) or a connection error (counted by cause), and the
   server's log lines that mention an error are kept for the reader.
--age sets HISTORY_MAX_AGE_SECONDS of ours (and before), so that rooms give their storage back while the burst
still runs; --before DIR adds the target "before": the local server of another checkout (built there: npm run
build), the code before a change side by side with this one; --rounds N runs every target N times, interleaved
(the order rotated each round), and prints each figure's median with its lowest, highest and spread.
Bounded: every request has a 30 s timeout, the burst stops after 300 s. Build first: npm run build.`,
  options: {
    targets: { default: "ours,bare,bare-durable", help: "of ours, before, bare, bare-durable" },
    first: { default: "300", help: "new rooms published into one at a time" },
    burst: { default: "10000", help: "publishes of the burst, each into a room of its own" },
    "in-flight": { default: "20", help: "publishes of the burst in flight at once" },
    gate: { default: "off", help: "our server's accept gate: off or auto" },
    port: { default: "18721", help: "port of each target in turn" },
    age: { help: "HISTORY_MAX_AGE_SECONDS of ours and before (the server's default when absent)" },
    before: { help: "the checkout the target before runs (built there)" },
    rounds: { default: "1", help: "runs of every target, interleaved" },
  },
  async run(args) {
    const gate = readChoice(args.text("gate"), "gate", ["off", "auto", "on"], "off");
    const [first, burstCount, inFlight, rounds] = [args.int("first", { min: 1 }), args.int("burst", { min: 1 }), args.int("in-flight", { min: 1 }), args.int("rounds", { min: 1 })];
    const age = args.has("age") ? String(args.int("age", { min: 1 })) : undefined;
    const before = args.text("before");
    const targets = args.list("targets");
    if (targets.includes("before") && before === undefined) throw new Error("the target before needs --before DIR");
    const specOf = (target: string): ServerSpec => {
      if (target !== "ours" && target !== "before") return { kind: target, port: args.int("port") };
      return { kind: "ours", port: args.int("port"), gate, ...(age === undefined ? {} : { vars: { HISTORY_MAX_AGE_SECONDS: age } }), ...(target === "before" ? { checkout: before } : {}) };
    };
    const byTarget = await interleaved(targets, rounds, async (target, round) => {
      const server = await Server.start(specOf(target));
      const tag = Math.random().toString(36).slice(2, 8);
      // Code paths compiled before anything is measured: a few rooms that are not counted.
      await phase(server, Array.from({ length: 50 }, (_, i) => `warm-${tag}-${i}`), 1);
      const rooms = Array.from({ length: first }, (_, i) => `first-${tag}-${i}`);
      const firstPhase = await phase(server, rooms, 1);
      const again = await phase(server, rooms, 1);
      const burst = await phase(server, Array.from({ length: burstCount }, (_, i) => `burst-${tag}-${i}`), inFlight, 300_000);
      // With --age, until the burst's last rooms could have given their storage back and been evicted (10 s idle).
      await sleep(age === undefined ? 1000 : (Number(age) + 12) * 1000);
      const rssAfter = readRssBytes(server.pid);
      const afterRssMb = rssAfter === undefined ? null : Math.round(rssAfter / 1048576);
      // What the server said (the tail of its output: the burst is the last thing it did), beyond its usual lines.
      const lines = server.output().split("\n");
      const logged = lines.filter((l) => ERROR_LINE.test(l));
      const result = {
        serverTail: burst.serverAlive ? undefined : lines.slice(-30),
        target,
        round,
        gate: target === "ours" || target === "before" ? gate : "none",
        age: target === "ours" || target === "before" ? (age ?? null) : null,
        first: firstPhase,
        again,
        firstPublishExtraCpuUs: (firstPhase.serverCpuPerPublishUs ?? 0) - (again.serverCpuPerPublishUs ?? 0),
        burst,
        afterRssMb,
        burstLogLines: logged.length,
        burstLogSample: [...new Set(logged.map((l) => l.slice(0, 400)))].slice(0, 12),
      };
      console.log(JSON.stringify(result));
      await server.stop();
      await sleep(1000);
      const ok = burst.statuses["200"] ?? 0;
      const summary: Record<string, number | undefined> = {
        ok,
        otherStatuses: burst.answered - ok,
        connectionErrors: Object.values(burst.connectionErrors).reduce((a, b) => a + b, 0),
        errorLines: logged.length,
        perSecond: burst.perSecond,
        cpuPerPublishUs: burst.serverCpuPerPublishUs ?? undefined,
        p50: burst.latencyMs.p50,
        p99: burst.latencyMs.p99,
        peakRssMb: burst.server.peakRssMb,
        afterRssMb: afterRssMb ?? undefined,
        firstExtraUs: result.firstPublishExtraCpuUs,
      };
      return { result, summary };
    });
    const results = [...byTarget.values()].flat().map((r) => r.result);
    log(
      ["target        round  first: CPU/publish  p50 ms   warm: CPU/publish  p50 ms   first publish extra   burst: answered  statuses  connection errors  s"]
        .concat(
          results.map(
            (r) =>
              `${r.target.padEnd(12)}  ${String(r.round + 1).padStart(5)}  ${`${r.first.serverCpuPerPublishUs} ± ${r.first.serverCpuPlusMinusUs} µs`.padStart(18)}  ${String(r.first.latencyMs.p50).padStart(6)}  ${`${r.again.serverCpuPerPublishUs} ± ${r.again.serverCpuPlusMinusUs} µs`.padStart(17)}  ${String(r.again.latencyMs.p50).padStart(6)}  ${`${r.firstPublishExtraCpuUs} µs`.padStart(19)}   ${`${r.burst.answered}/${r.burst.publishes}`.padStart(14)}  ${JSON.stringify(r.burst.statuses)}  ${JSON.stringify(r.burst.connectionErrors)}  ${r.burst.seconds}`,
          ),
        )
        .join("\n"),
    );
    log(medianTable([...byTarget].map(([name, runs]) => ({ name, rounds: runs })), BURST_METRICS, rounds));
  },
});
