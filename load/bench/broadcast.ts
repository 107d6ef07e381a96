import { readChoice } from "../src/kit/args";
import { defineBench, log } from "../src/kit/bench";
import { cpuMs, loadAverage, rssMb } from "../src/kit/proc";
import { RawClient } from "../src/kit/raw-client";
import { Server } from "../src/kit/server";
import { paced, sleep, waitFor } from "../src/kit/time";
import { percentileOfSorted, spreadOf } from "../src/stats/percentile";

export default defineBench({
  name: "broadcast",
  title: "POST /broadcast into many rooms: time until the last socket had it, and its server CPU",
  about: `Opens sockets in many rooms, sends POST /broadcast a few times, and measures for each broadcast the time until the
last socket had it and the server CPU it cost (workerd's utime + stime from /proc). Clients ack what they read
with its tag and ping, as docs/protocol.md's raw client does. --idle-before S waits S seconds between the registry
check and the first broadcast; over 10 s the rooms hibernate, so the first broadcast also measures waking them.
Without --url it starts the local server on --port with a fresh data directory (build first: npm run build) and
stops it at the end.`,
  options: {
    rooms: { default: "1000", help: "rooms" },
    "per-room": { default: "1", help: "sockets per room" },
    broadcasts: { default: "5", help: "broadcasts, 2 s apart" },
    select: { default: "rooms", help: "address the rooms by list (rooms) or by name prefix (prefix)" },
    port: { default: "18320", help: "port of the server started" },
    payload: { default: "100", help: "payload bytes" },
    shards: { help: "COORDINATOR_SHARDS of the server started" },
    "idle-before": { default: "1", help: "seconds between the registry check and the first broadcast" },
    url: { help: "a server started elsewhere, instead of one started here" },
    pid: { help: "with --url: its workerd's pid, for CPU and memory" },
    "max-seconds": { default: "300", help: "the run gives up after this long" },
  },
  limitSeconds: (args) => args.number("max-seconds", { min: 1 }),
  async run(args) {
    const [roomCount, perRoom, count, payload] = [args.int("rooms", { min: 1 }), args.int("per-room", { min: 1 }), args.int("broadcasts", { min: 1 }), args.int("payload")];
    const select = readChoice(args.text("select"), "select", ["rooms", "prefix"], "rooms");
    const shards = args.text("shards");
    const url = args.text("url");
    const server = url === undefined ? await Server.start({ kind: "ours", port: args.int("port"), ...(shards ? { vars: { COORDINATOR_SHARDS: shards } } : {}) }) : undefined;
    const base = server?.url ?? (url as string);
    const pid = server?.pid ?? (args.has("pid") ? args.int("pid") : undefined);
    const prefix = `bench-${Date.now().toString(36)}-`;
    const rooms = Array.from({ length: roomCount }, (_, i) => `${prefix}${String(i).padStart(5, "0")}`);
    // When each broadcast (its data.bench) arrived at each socket.
    const received = new Map<number, number[]>();
    const onEvent = (event: { type: string; data?: unknown }): void => {
      const id = (event.data as { bench?: number } | undefined)?.bench;
      if (event.type === "message" && id !== undefined) received.get(id)?.push(performance.now());
    };
    const connectStart = performance.now();
    const sockets: RawClient[] = [];
    await paced(roomCount * perRoom, { concurrency: 100 }, async (i) => {
      sockets.push(await new RawClient(`${base.replace(/^http/, "ws")}/rooms/${rooms[Math.floor(i / perRoom)]}/ws`, { ack: "frame", onEvent }).open());
    });
    log(`${sockets.length} sockets in ${rooms.length} rooms connected in ${((performance.now() - connectStart) / 1000).toFixed(1)} s`);

    // Every room registered (0 -> 1 reports are asynchronous).
    const registryStart = performance.now();
    for (;;) {
      let listed = 0;
      let cursor: string | null = null;
      do {
        const page = (await (await fetch(`${base}/rooms?prefix=${prefix}&limit=1000${cursor ? `&cursor=${cursor}` : ""}`)).json()) as { rooms: unknown[]; cursor: string | null };
        listed += page.rooms.length;
        cursor = page.cursor;
      } while (cursor);
      if (listed === roomCount) break;
      if (performance.now() - registryStart > 30_000) throw new Error(`registry lists ${listed} of ${roomCount} rooms after 30 s`);
      await sleep(200);
    }
    log(`registry lists all ${roomCount} rooms ${((performance.now() - registryStart) / 1000).toFixed(1)} s after the last connect`);
    await sleep(args.number("idle-before", { min: 0 }) * 1000);

    const results = [];
    for (let id = 0; id < count; id++) {
      received.set(id, []);
      const body = JSON.stringify({ data: { bench: id, pad: "x".repeat(payload) }, ...(select === "prefix" ? { prefix } : { rooms }) });
      const cpu0 = pid ? cpuMs(pid) : 0;
      const t0 = performance.now();
      const res = await fetch(`${base}/broadcast`, { method: "POST", headers: { "content-type": "application/json" }, body });
      const answer = (await res.json()) as { rooms?: number; sockets?: number; failedCount?: number };
      const httpMs = performance.now() - t0;
      const arrivals = received.get(id) as number[];
      await waitFor(() => arrivals.length >= sockets.length, 60_000, 5);
      const times = arrivals.map((t) => t - t0).sort((a, b) => a - b);
      const cpu1 = pid ? cpuMs(pid) : 0;
      results.push({
        broadcast: id,
        status: res.status,
        rooms: answer.rooms,
        sockets: answer.sockets,
        failed: answer.failedCount,
        receivedBy: times.length,
        httpMs: Math.round(httpMs),
        firstMs: Math.round(times[0] ?? Number.NaN),
        p50Ms: Math.round(percentileOfSorted(times, 50)),
        p99Ms: Math.round(percentileOfSorted(times, 99)),
        lastMs: Math.round(times.at(-1) ?? Number.NaN),
        serverCpuMs: Math.round(cpu1 - cpu0),
      });
      log(JSON.stringify(results.at(-1)));
      await sleep(2000);
    }
    for (const ws of sockets) ws.cut();
    console.log(
      JSON.stringify(
        {
          select,
          rooms: roomCount,
          socketsPerRoom: perRoom,
          broadcasts: count,
          payloadBytes: payload,
          allReceivedEveryBroadcast: results.every((r) => r.receivedBy === sockets.length),
          idleBeforeFirstSeconds: args.number("idle-before"),
          medianLastMs: spreadOf(results.map((r) => r.lastMs)).median,
          worstLastMs: Math.max(...results.map((r) => r.lastMs)),
          medianServerCpuMs: spreadOf(results.map((r) => r.serverCpuMs)).median,
          serverRssMb: pid ? Math.round(rssMb(pid)) : null,
          loadavg: loadAverage(),
          results,
        },
        null,
        2,
      ),
    );
  },
});
