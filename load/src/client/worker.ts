/**
 * Client process: holds its share of the sockets and reports counters to the
 * coordinating process. Several of these run at once so that the load
 * generator's own event loop is not what limits a run.
 */
import { muxRoomsOf } from "../options";
import { addTotals, emptyTotals } from "../stats/ledger";
import { ClientStats } from "./client-stats";
import { RoomLoadClient } from "./room-client";
import { MuxLoadClient } from "./mux-client";
import { PusherLoadClient } from "./pusher-client";
import type { SimulatedClient } from "./simulated";
import {
  isSlowClient,
  type GroupResult,
  type MainToWorker,
  type SubscribeAllDone,
  type WaveDone,
  type WorkerConfig,
  type WorkerProgress,
  type WorkerSettled,
  type WorkerToMain,
} from "./messages";

const PROGRESS_INTERVAL_MS = 250;

function post(message: WorkerToMain): void {
  // With a callback, a closed channel is reported here instead of crashing the process.
  if (process.connected) process.send?.(message, undefined, undefined, () => undefined);
}

function readConfig(): WorkerConfig {
  const raw = process.env.LOAD_WORKER_CONFIG;
  if (!raw) throw new Error("LOAD_WORKER_CONFIG is not set; this file is started by the load tool");
  return JSON.parse(raw) as WorkerConfig;
}

const config = readConfig();
const stats = new ClientStats(config.histogramCeilingMs);
const clients = new Map<number, SimulatedClient>();

function clientFor(index: number): SimulatedClient {
  let client = clients.get(index);
  if (!client) {
    const sources = config.sourceAddresses;
    const source = sources.length ? sources[index % sources.length] : undefined;
    const group = isSlowClient(index, config.slowFraction, config.slowCount, config.totalSockets) ? "slow" : "fast";
    client =
      config.pusher
        ? new PusherLoadClient(index, muxRoomsOf(index, config.mux, config.rooms), group, source, config, stats)
        : config.mux > 0
        ? new MuxLoadClient(index, muxRoomsOf(index, config.mux, config.rooms), group, source, config, stats)
        : new RoomLoadClient(index, config.rooms[index % config.rooms.length] as string, group, source, config, stats);
    clients.set(index, client);
  }
  return client;
}

/** Every open multiplexed connection of this process subscribes to all its rooms at once. */
async function subscribeAll(id: number): Promise<SubscribeAllDone> {
  const mine = [...clients.values()].filter((c): c is MuxLoadClient => c instanceof MuxLoadClient && c.isOpen);
  const before = { ...stats.subscribeRefusals };
  let lastAt = 0;
  const outcomes = await Promise.all(
    mine.map((client) =>
      client.subscribeAll().then((outcome) => {
        lastAt = Math.max(lastAt, Date.now());
        return outcome;
      }),
    ),
  );
  const refusals: Record<string, number> = {};
  for (const [code, n] of Object.entries(stats.subscribeRefusals)) if (n - (before[code] ?? 0) > 0) refusals[code] = n - (before[code] ?? 0);
  return {
    id,
    connections: mine.length,
    asked: outcomes.reduce((n, o) => n + o.asked, 0),
    subscribed: outcomes.reduce((n, o) => n + o.subscribed, 0),
    refusals,
    closed: outcomes.filter((o) => o.closed).length,
    lastAt,
  };
}

/** Opens this process's share of sockets [from, to) with a bounded number of handshakes in flight. */
async function openWave(waveId: number, from: number, to: number): Promise<WaveDone> {
  const mine: SimulatedClient[] = [];
  for (let i = from; i < to; i++) if (i % config.workerCount === config.workerIndex) mine.push(clientFor(i));
  const failures: Record<string, number> = {};
  let ok = 0;
  let next = 0;
  const runner = async (): Promise<void> => {
    while (next < mine.length) {
      const client = mine[next++] as SimulatedClient;
      const outcome = await client.connect();
      if (outcome.ok) ok++;
      else failures[outcome.cause] = (failures[outcome.cause] ?? 0) + 1;
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(config.inFlight, mine.length)) }, runner));
  const welcomeSeqByRoom: Record<string, number> = {};
  for (const client of mine) {
    for (const [room, ledger] of client.subscriptions()) {
      const point = ledger.resumePoint();
      if (!point) continue;
      const seen = welcomeSeqByRoom[room];
      welcomeSeqByRoom[room] = seen === undefined ? point.since : Math.min(seen, point.since);
    }
  }
  return { waveId, attempted: mine.length, ok, failures, welcomeSeqByRoom };
}

function progress(): WorkerProgress {
  let open = 0;
  let connecting = 0;
  let reconnecting = 0;
  let subscriptions = 0;
  const lowestSeqByRoom: Record<string, number> = {};
  for (const client of clients.values()) {
    if (client.isOpen) open++;
    if (client.isConnecting) connecting++;
    if (client.waitingToComeBack || client.isReconnecting) reconnecting++;
    if (client instanceof MuxLoadClient) subscriptions += client.liveSubscriptions;
    else if (client.isOpen) subscriptions++;
    if (!client.expectedToKeepUp) continue;
    for (const [room, ledger] of client.subscriptions()) {
      if (ledger.resumePoint() === undefined) continue;
      const seq = ledger.highestSeq;
      const seen = lowestSeqByRoom[room];
      lowestSeqByRoom[room] = seen === undefined ? seq : Math.min(seen, seq);
    }
  }
  const cpu = process.cpuUsage();
  return {
    open,
    connecting,
    handshakes: stats.handshakes,
    failures: stats.failures,
    welcomes: stats.welcomes,
    events: stats.events,
    frames: stats.frames,
    bytes: stats.bytes,
    closes: stats.closes,
    reconnecting,
    subscriptions,
    lowestSeqByRoom,
    cpuUserUs: cpu.user,
    cpuSystemUs: cpu.system,
    rssBytes: process.memoryUsage.rss(),
  };
}

function settle(generations: Record<string, Array<{ first: number; last: number }>>): WorkerSettled {
  const group = (name: "fast" | "slow"): GroupResult => {
    const totals = emptyTotals();
    let count = 0;
    for (const client of clients.values()) {
      if (client.group !== name) continue;
      let counted = false;
      // Every subscription on its own: a room's loss is never made up by another room's messages.
      for (const [room, ledger] of client.subscriptions()) {
        if (ledger.resumePoint() === undefined) continue;
        counted = true;
        addTotals(totals, ledger.settle(generations[room] ?? []));
      }
      if (counted) count++;
    }
    return { clients: count, totals, latency: stats.latency[name].toJSON(), fromRequest: stats.fromRequest[name].toJSON() };
  };
  let notBack = 0;
  for (const client of clients.values()) if (client.waitingToComeBack) notBack++;
  return {
    groups: { fast: group("fast"), slow: group("slow") },
    lastArrivalMs: Object.fromEntries(stats.lastArrivalMs),
    handshakeMs: stats.handshakeMs.toJSON(),
    welcomeMs: stats.welcomeMs.toJSON(),
    failures: stats.failuresByCause,
    closesByCode: stats.closesByCode,
    closeRecords: stats.closeRecords,
    reconnect: {
      attempts: stats.reconnectAttempts,
      failures: stats.reconnectFailures,
      downtimeMs: stats.downtimeMs.toJSON(),
      notBack,
      lastBackAt: stats.lastBackAt,
    },
    pongs: stats.pongs,
    parseErrors: stats.parseErrors,
    errorEvents: stats.errorEvents,
    subscribe: { subscribed: stats.subscribed, refusals: stats.subscribeRefusals, connectionMs: stats.subscribeMs.toJSON() },
  };
}

async function closeAll(): Promise<void> {
  for (const client of clients.values()) client.close();
  // Give close handshakes a moment, then cut whatever is left.
  const deadline = Date.now() + 3000;
  while (Date.now() < deadline && [...clients.values()].some((c) => c.isOpen)) {
    await new Promise((r) => setTimeout(r, 50));
  }
  for (const client of clients.values()) client.terminate();
}

process.on("message", (raw: unknown) => {
  const message = raw as MainToWorker;
  switch (message.type) {
    case "open":
      openWave(message.waveId, message.from, message.to).then(
        (wave) => post({ type: "wave-done", wave }),
        (error: unknown) => post({ type: "fatal", message: String(error) }),
      );
      break;
    case "stall":
      for (const client of clients.values()) if (client.group === "slow") client.stall();
      break;
    case "resume":
      for (const client of clients.values()) client.resume();
      break;
    case "drop":
      for (const client of clients.values()) client.drop(message.at);
      break;
    case "mark-drop":
      for (const client of clients.values()) client.markDropped(message.at);
      break;
    case "settle":
      post({ type: "settled", settled: settle(message.generations) });
      break;
    case "subscribe-all":
      subscribeAll(message.id).then(
        (done) => post({ type: "subscribed-all", done }),
        (error: unknown) => post({ type: "fatal", message: String(error) }),
      );
      break;
    case "close-all":
      closeAll().then(
        () => post({ type: "closed" }),
        (error: unknown) => post({ type: "fatal", message: String(error) }),
      );
      break;
  }
});

// The coordinator going away must never leave sockets behind.
process.on("disconnect", () => process.exit(0));

const heartbeat = setInterval(() => {
  const now = Date.now();
  for (const client of clients.values()) client.tick(now);
}, 1000);
const reporter = setInterval(() => post({ type: "progress", progress: progress() }), PROGRESS_INTERVAL_MS);
heartbeat.unref();
reporter.unref();

post({ type: "ready" });
