import { defineBench, log } from "../src/kit/bench";
import { cpuMs, loadAverage, rssMb } from "../src/kit/proc";
import { RawClient } from "../src/kit/raw-client";
import { resultHeader, writeResult } from "../src/kit/results";
import { Server } from "../src/kit/server";
import { sleep } from "../src/kit/time";
import type { ResultHeader } from "../src/result";
import { percentileOfSorted } from "../src/stats/percentile";

/** One request's status (0: no answer at all) and how long it took. */
interface Probe {
  status: number;
  ms: number;
}

async function timed(url: string, init?: RequestInit): Promise<Probe> {
  const started = performance.now();
  try {
    const res = await fetch(url, { ...init, signal: AbortSignal.timeout(60_000) });
    await res.text();
    return { status: res.status, ms: performance.now() - started };
  } catch {
    return { status: 0, ms: performance.now() - started };
  }
}

/** A broadcast's status, time to answer, and answer (without its list of failed rooms). */
async function broadcast(base: string, rooms: readonly string[], key: string): Promise<{ status: number; ms: number; answer: Record<string, unknown> }> {
  const started = performance.now();
  const res = await fetch(`${base}/broadcast`, {
    method: "POST",
    headers: { "content-type": "application/json", "idempotency-key": key },
    body: JSON.stringify({ data: { notice: key }, rooms }),
  });
  const answer = (await res.json()) as Record<string, unknown>;
  return { status: res.status, ms: Math.round(performance.now() - started), answer: { ...answer, failed: undefined } };
}

function summarize(list: readonly Probe[]): { count: number; not200: number; statuses5xx: number; p50Ms: number; p99Ms: number; maxMs: number } {
  const ms = list.map((p) => p.ms).sort((a, b) => a - b);
  return {
    count: list.length,
    not200: list.filter((p) => p.status !== 200).length,
    statuses5xx: list.filter((p) => p.status >= 500 || p.status === 0).length,
    p50Ms: Math.round(percentileOfSorted(ms, 50)),
    p99Ms: Math.round(percentileOfSorted(ms, 99)),
    maxMs: Math.round(ms.at(-1) ?? Number.NaN),
  };
}

interface BroadcastIdleResult extends ResultHeader {
  bench: "broadcast-idle";
  rooms: number;
  loadavg: string;
  runs: Array<Record<string, unknown>>;
}

export default defineBench({
  name: "broadcast-idle",
  title: "POST /broadcast to 10,000 rooms without sockets: time, workerd peak RSS, failed rooms, others' requests meanwhile, a retry",
  about: `A broadcast to rooms without sockets (an explicit list of rooms nobody is in, created by the broadcast), at the
documented maximum of BROADCAST_MAX_ROOMS (10,000), on the local server: how long it takes to answer, the server's
memory (workerd RSS, sampled every 200 ms), what the rooms answered (rooms, failedCount, paced), SQLITE_NOMEM lines
in the server's output, and what someone else sees meanwhile (a probe that publishes into a live room and reads its
history every 250 ms: statuses and latency); then the same request again with the same key (a retry), which counts
what is done. --compare DIR runs the same first against the local server of another checkout (built), then against
this one: before and after a change, in one invocation. docs/benchmarks.md, "Broadcast to rooms without sockets",
holds the figures. Build first (npm run build); run it under flock /tmp/bench.lock.`,
  options: {
    rooms: { default: "10000", help: "rooms in the list, 1 to 10,000 (BROADCAST_MAX_ROOMS at most)" },
    port: { default: "18360", help: "port of the server started" },
    compare: { help: "a checkout whose local server runs first (the code before a change)" },
    "server-var": { multiple: true, help: "K=V, a var of the servers started" },
    "max-seconds": { default: "1500", help: "the run gives up after this long" },
  },
  limitSeconds: (args) => args.number("max-seconds", { min: 1 }),
  async run(args) {
    const roomCount = args.int("rooms", { min: 1, max: 10_000 });
    const port = args.int("port");
    const compare = args.text("compare");
    const vars: Record<string, string> = { BROADCAST_MAX_ROOMS: "10000" };
    for (const pair of args.texts("server-var")) {
      const at = pair.indexOf("=");
      if (at <= 0) throw new Error(`--server-var takes K=V, got ${JSON.stringify(pair)}`);
      vars[pair.slice(0, at)] = pair.slice(at + 1);
    }
    const rooms = Array.from({ length: roomCount }, (_, i) => `bi-${String(i).padStart(5, "0")}`);

    const runOn = async (label: string, checkout: string | undefined): Promise<Record<string, unknown>> => {
      const server = await Server.start({ kind: "ours", port, vars, ...(checkout ? { checkout } : {}) });
      try {
        // Someone else: a reader in a live room, and a probe publishing there and reading its history.
        const reader = await new RawClient(`${server.wsUrl}/rooms/bi-live/ws`, { ack: "frame" }).open();
        const baseMb = rssMb(server.pid);
        let peakMb = baseMb;
        let running = true;
        const sampler = (async () => {
          while (running) {
            peakMb = Math.max(peakMb, rssMb(server.pid));
            await sleep(200);
          }
        })();
        const probes: { publish: Probe[]; history: Probe[] } = { publish: [], history: [] };
        const prober = (async () => {
          for (let i = 0; running; i++) {
            probes.publish.push(await timed(`${server.url}/rooms/bi-live/publish`, { method: "POST", body: String(i) }));
            probes.history.push(await timed(`${server.url}/rooms/bi-live/messages?limit=10`));
            await sleep(250);
          }
        })();
        const cpu0 = cpuMs(server.pid);
        const first = await broadcast(server.url, rooms, "bench-1");
        const serverCpuFirstMs = Math.round(cpuMs(server.pid) - cpu0);
        log(`${label}: first ${first.status} in ${first.ms} ms ${JSON.stringify(first.answer)}`);
        const retry = await broadcast(server.url, rooms, "bench-1");
        log(`${label}: retry ${retry.status} in ${retry.ms} ms ${JSON.stringify(retry.answer)}`);
        running = false;
        await Promise.all([sampler, prober]);
        await reader.close();
        // The launcher's output as the kit keeps it (its last 200 KB).
        const nomem = (server.output().match(/SQLITE_NOMEM/g) ?? []).length;
        return {
          label,
          first,
          retry,
          serverCpuFirstMs,
          rssBaseMb: Math.round(baseMb),
          rssPeakMb: Math.round(peakMb),
          sqliteNomemLines: nomem,
          probePublish: summarize(probes.publish),
          probeHistory: summarize(probes.history),
        };
      } finally {
        await server.stop();
      }
    };

    const result: BroadcastIdleResult = { ...resultHeader("broadcast-idle", args.argv), bench: "broadcast-idle", rooms: roomCount, loadavg: loadAverage(), runs: [] };
    if (compare) result.runs.push(await runOn(`before (${compare})`, compare));
    result.runs.push(await runOn("this checkout", undefined));
    console.log(JSON.stringify(result.runs, null, 2));
    console.log(`results: ${writeResult(result)}`);
  },
});
