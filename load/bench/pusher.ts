import Pusher from "pusher-js";
import { WebSocket } from "ws";
import { PING, roomPublishPath } from "../../protocol";
import { PUSHER_PING, PUSHER_PONG } from "../../protocol/pusher";
import { defineBench, log } from "../src/kit/bench";
import { median } from "../src/stats/percentile";
import { Server } from "../src/kit/server";
import { paced, sleep, waitFor } from "../src/kit/time";
import { LOAD_PUSHER_APP, loadPusherRoom } from "../src/client/pusher-client";
import { DEFAULTS } from "../../common/settings";

const PUSHER_ENV = { PUSHER_APP_ID: LOAD_PUSHER_APP.id, PUSHER_APP_KEY: LOAD_PUSHER_APP.key, PUSHER_APP_SECRET: LOAD_PUSHER_APP.secret };

/** Starts the local server with the Pusher app, its gate off (workerd listening itself), on `port`. */
function startServer(port: number): Promise<Server> {
  return Server.start({ kind: "ours", port, gate: "off", build: true, env: { ...PUSHER_ENV, CONNECTION_CEILING: "15000" } });
}

/** How many hubs of each kind started (an instance each: a first connection, or a wake from hibernation) in `log`. */
function instanceStarts(log: string): { pusher: number; hub: number } {
  const starts = { pusher: 0, hub: 0 };
  for (const match of log.matchAll(/"event":"instance_started","hub":"(pusher|hub)-\d+"/g)) starts[match[1] as "pusher" | "hub"] += 1;
  return starts;
}

/**
 * An idle connection as its client keeps it: a Pusher one sends pusher-js's exact ping every `pingSeconds`
 * (pusher-js pings after 120 s without hearing anything) and answers the server's pings; one of this service's
 * protocol sends `ping` as the SDK does (every 25 s). Each follows `channels` of `of` channels or rooms.
 */
async function idleConnection(port: number, kind: "pusher" | "hub", index: number, channels: number, of: number, pingSeconds: number): Promise<() => void> {
  const path = kind === "pusher" ? `/app/${LOAD_PUSHER_APP.key}?protocol=7&client=bench&version=1.0` : "/ws";
  const ws = new WebSocket(`ws://127.0.0.1:${port}${path}`, { perMessageDeflate: false });
  await new Promise<void>((resolve, reject) => {
    ws.once("open", () => resolve());
    ws.once("error", reject);
  });
  ws.on("message", (data: Buffer) => {
    if (kind === "pusher" && data.toString().includes('"pusher:ping"')) ws.send(PUSHER_PONG);
  });
  for (let c = 0; c < channels; c++) {
    const name = `idle-${(index * channels + c) % of}`;
    ws.send(kind === "pusher" ? JSON.stringify({ event: "pusher:subscribe", data: { channel: name } }) : JSON.stringify({ type: "subscribe", room: name }));
  }
  const timer = setInterval(() => ws.send(kind === "pusher" ? PUSHER_PING : PING), pingSeconds * 1000);
  return () => {
    clearInterval(timer);
    ws.terminate();
  };
}

/** Pusher hub wake-ups while every connection is idle: what idle Pusher connections cost beside idle multiplexed ones. */
async function wakeups(port: number, connections: number, minutes: number): Promise<void> {
  const server = await startServer(port);
  const closers: Array<() => void> = [];
  try {
    await paced(connections, { rate: 500, concurrency: 64 }, async (i) => {
      closers.push(await idleConnection(port, "pusher", i, 5, 100, 120));
      closers.push(await idleConnection(port, "hub", i, 5, 100, 25));
    });
    // Subscribes settle, hubs report, and everything goes idle long enough to hibernate (the runtime's ~10 s).
    await sleep(30_000);
    const before = instanceStarts(server.output());
    log(`pusher: ${connections} Pusher and ${connections} multiplexed connections idle for ${minutes} min (instances so far: ${JSON.stringify(before)})`);
    await sleep(minutes * 60_000);
    const after = instanceStarts(server.output());
    const hours = minutes / 60;
    const hubs = Math.min(DEFAULTS.MULTIPLEX_HUBS, connections);
    for (const kind of ["pusher", "hub"] as const) {
      const wakes = after[kind] - before[kind];
      const name = kind === "pusher" ? "Pusher connections (pusher-js's ping every 120 s)" : "multiplexed connections (the SDK's ping every 25 s)";
      console.log(
        `${name}: ${wakes} hub wake-ups in ${minutes} min over ${hubs} hubs: ` +
          `${(wakes / hubs / hours).toFixed(1)} per hub-hour, ${(wakes / connections / hours).toFixed(4)} per connection-hour; ` +
          `pings answered without a wake: ${Math.floor((minutes * 60) / (kind === "pusher" ? 120 : 25)) * connections}`,
      );
    }
  } finally {
    for (const close of closers) close();
    await server.stop();
  }
}

/** A reconnect storm of stock pusher-js clients: the server restarts (4200), every client comes back and subscribes again by itself. */
async function storm(port: number, clients: number, channels: number, rounds: number): Promise<void> {
  const backTimes: number[] = [];
  for (let round = 1; round <= rounds; round++) {
    const server = await startServer(port);
    const all: Pusher[] = [];
    const subscribedAt = new Map<number, number>();
    const received = new Set<number>();
    try {
      await paced(clients, { rate: 500, concurrency: 64 }, async (i) => {
        const client = new Pusher(LOAD_PUSHER_APP.key, { cluster: "bench", wsHost: "127.0.0.1", wsPort: port, forceTLS: false, enabledTransports: ["ws"], disableStats: true });
        const channel = client.subscribe(`storm-${i % channels}`);
        channel.bind("pusher:subscription_succeeded", () => subscribedAt.set(i, Date.now()));
        // This service's own publishes reach a Pusher client as events named "message" (docs/pusher.md).
        channel.bind("message", () => received.add(i));
        all.push(client);
      });
      if (!(await waitFor(() => subscribedAt.size === clients, 60_000))) throw new Error(`only ${subscribedAt.size} of ${clients} subscribed`);
      subscribedAt.clear();
      const restartedAt = Date.now();
      await server.restart();
      const back = await waitFor(() => subscribedAt.size === clients, 120_000, 50);
      const lastBack = Math.max(...subscribedAt.values());
      const times = [...subscribedAt.values()].map((t) => t - restartedAt).sort((a, b) => a - b);
      for (let c = 0; c < channels; c++) {
        await fetch(`http://127.0.0.1:${port}${roomPublishPath(loadPusherRoom(`storm-${c}`))}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ round }) });
      }
      await waitFor(() => received.size === clients, 10_000);
      backTimes.push(lastBack - restartedAt);
      console.log(
        `round ${round}: ${subscribedAt.size} of ${clients} pusher-js clients back and subscribed ${back ? "" : "(not all) "}` +
          `${((lastBack - restartedAt) / 1000).toFixed(1)} s after the restart began (p50 ${((times[Math.floor(times.length / 2)] ?? 0) / 1000).toFixed(1)} s); ` +
          `a publish into each of the ${channels} channels after: ${received.size} of ${clients} delivered`,
      );
    } finally {
      for (const client of all) client.disconnect();
      await server.stop();
    }
  }
  console.log(`all back: median ${(median(backTimes) / 1000).toFixed(1)} s over ${rounds} rounds (${backTimes.map((t) => (t / 1000).toFixed(1)).join(", ")} s)`);
}

export default defineBench({
  name: "pusher",
  title: "the Pusher front door idle (hub wake-ups) and under a reconnect storm of stock pusher-js clients",
  about: `What Pusher connections (docs/pusher.md) cost when idle, and how a storm of stock pusher-js clients comes
back after a restart. Its deliveries and idle memory beside multiplexed connections are the multiplex
benchmark's pusher and pusher-idle tables. Build first (npm run build); run it under flock /tmp/bench.lock.

Tables:
  wakeups  N Pusher connections (5 of 100 channels each, pusher-js's exact ping every 120 s, answering the
           server's pings) and N multiplexed connections (5 of 100 rooms, the SDK's ping every 25 s) on one local
           server, idle for --minutes: the hubs' instance starts counted from the server's log (the local server
           logs each: a wake from hibernation is one), per hub-hour and per connection-hour
  storm    N stock pusher-js clients (1 of --channels channels each) subscribed; the server restarted (SIGTERM:
           every connection closed with 4200, reconnect now); the time until every client is connected and
           subscribed again by itself, and a publish into each channel after, delivered to each client`,
  options: {
    table: { default: "all", help: "wakeups, storm or all" },
    connections: { default: "1000", help: "wakeups: connections of each kind; storm: pusher-js clients" },
    minutes: { default: "10", help: "wakeups: minutes idle" },
    channels: { default: "50", help: "storm: channels the clients are spread over" },
    rounds: { default: "3", help: "storm: rounds, 1 to 9" },
  },
  async run(args) {
    const table = args.text("table") ?? "all";
    const connections = args.int("connections", { min: 1, max: 5000 });
    if (table === "wakeups" || table === "all") await wakeups(18851, connections, args.number("minutes", { min: 0.5, max: 60 }));
    if (table === "storm" || table === "all") await storm(18852, connections, args.int("channels", { min: 1, max: 1000 }), args.int("rounds", { min: 1, max: 9 }));
  },
});
