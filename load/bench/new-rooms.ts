import { readFileSync } from "node:fs";
import { Agent, request } from "node:http";
import { readChoice } from "../src/kit/args";
import { defineBench, log } from "../src/kit/bench";
import { countFds, countMaps, readCpuUs, readRssBytes } from "../src/kit/proc";
import { Server } from "../src/kit/server";
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
Bounded: every request has a 30 s timeout, the burst stops after 300 s. Build first: npm run build.`,
  options: {
    targets: { default: "ours,bare,bare-durable", help: "of ours, bare, bare-durable" },
    first: { default: "300", help: "new rooms published into one at a time" },
    burst: { default: "10000", help: "publishes of the burst, each into a room of its own" },
    "in-flight": { default: "20", help: "publishes of the burst in flight at once" },
    gate: { default: "off", help: "our server's accept gate: off or auto" },
    port: { default: "18721", help: "port of each target in turn" },
  },
  async run(args) {
    const gate = readChoice(args.text("gate"), "gate", ["off", "auto", "on"], "off");
    const [first, burstCount, inFlight] = [args.int("first", { min: 1 }), args.int("burst", { min: 1 }), args.int("in-flight", { min: 1 })];
    const results = [];
    for (const target of args.list("targets")) {
      const server = await Server.start({ kind: target, port: args.int("port"), ...(target === "ours" ? { gate } : {}) });
      const tag = Math.random().toString(36).slice(2, 8);
      // Code paths compiled before anything is measured: a few rooms that are not counted.
      await phase(server, Array.from({ length: 50 }, (_, i) => `warm-${tag}-${i}`), 1);
      const rooms = Array.from({ length: first }, (_, i) => `first-${tag}-${i}`);
      const firstPhase = await phase(server, rooms, 1);
      const again = await phase(server, rooms, 1);
      const burst = await phase(server, Array.from({ length: burstCount }, (_, i) => `burst-${tag}-${i}`), inFlight, 300_000);
      await sleep(1000);
      // What the server said (the tail of its output: the burst is the last thing it did), beyond its usual lines.
      const lines = server.output().split("\n");
      const logged = lines.filter((l) => /error|fail|abort|overload|exceed|refus|reset|kill|timeout|exited|signal/i.test(l));
      const result = {
        serverTail: burst.serverAlive ? undefined : lines.slice(-30),
        target,
        gate: target === "ours" ? gate : "none",
        first: firstPhase,
        again,
        firstPublishExtraCpuUs: (firstPhase.serverCpuPerPublishUs ?? 0) - (again.serverCpuPerPublishUs ?? 0),
        burst,
        burstLogLines: logged.length,
        burstLogSample: [...new Set(logged.map((l) => l.slice(0, 400)))].slice(0, 12),
      };
      results.push(result);
      console.log(JSON.stringify(result));
      await server.stop();
      await sleep(1000);
    }
    log(
      ["target        first: CPU/publish  p50 ms   warm: CPU/publish  p50 ms   first publish extra   burst: answered  statuses  connection errors  s"]
        .concat(
          results.map(
            (r) =>
              `${r.target.padEnd(12)}  ${`${r.first.serverCpuPerPublishUs} ± ${r.first.serverCpuPlusMinusUs} µs`.padStart(18)}  ${String(r.first.latencyMs.p50).padStart(6)}  ${`${r.again.serverCpuPerPublishUs} ± ${r.again.serverCpuPlusMinusUs} µs`.padStart(17)}  ${String(r.again.latencyMs.p50).padStart(6)}  ${`${r.firstPublishExtraCpuUs} µs`.padStart(19)}   ${`${r.burst.answered}/${r.burst.publishes}`.padStart(14)}  ${JSON.stringify(r.burst.statuses)}  ${JSON.stringify(r.burst.connectionErrors)}  ${r.burst.seconds}`,
          ),
        )
        .join("\n"),
    );
  },
});
