/**
 * Client process: holds its share of the sockets and reports counters to the
 * coordinating process. Several of these run at once so that the load
 * generator's own event loop is not what limits a run.
 */
import { addTotals, emptyTotals } from "../stats/ledger";
import { ClientStats, LoadClient } from "./load-client";
import {
  isSlowClient,
  type GroupResult,
  type MainToWorker,
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
const clients = new Map<number, LoadClient>();

function clientFor(index: number): LoadClient {
  let client = clients.get(index);
  if (!client) {
    const room = config.rooms[index % config.rooms.length] as string;
    const sources = config.sourceAddresses;
    const source = sources.length ? sources[index % sources.length] : undefined;
    const group = isSlowClient(index, config.slowFraction, config.slowCount, config.totalSockets) ? "slow" : "fast";
    client = new LoadClient(index, room, group, source, config, stats);
    clients.set(index, client);
  }
  return client;
}

/** Opens this process's share of sockets [from, to) with a bounded number of handshakes in flight. */
async function openWave(waveId: number, from: number, to: number): Promise<WaveDone> {
  const mine: LoadClient[] = [];
  for (let i = from; i < to; i++) if (i % config.workerCount === config.workerIndex) mine.push(clientFor(i));
  const failures: Record<string, number> = {};
  let ok = 0;
  let next = 0;
  const runner = async (): Promise<void> => {
    while (next < mine.length) {
      const client = mine[next++] as LoadClient;
      const outcome = await client.connect();
      if (outcome.ok) ok++;
      else failures[outcome.cause] = (failures[outcome.cause] ?? 0) + 1;
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(config.inFlight, mine.length)) }, runner));
  const welcomeSeqByRoom: Record<string, number> = {};
  for (const client of mine) {
    const point = client.ledger.resumePoint();
    if (!point) continue;
    const seen = welcomeSeqByRoom[client.room];
    welcomeSeqByRoom[client.room] = seen === undefined ? point.since : Math.min(seen, point.since);
  }
  return { waveId, attempted: mine.length, ok, failures, welcomeSeqByRoom };
}

function progress(): WorkerProgress {
  let open = 0;
  let connecting = 0;
  let reconnecting = 0;
  const lowestSeqByRoom: Record<string, number> = {};
  for (const client of clients.values()) {
    if (client.isOpen) open++;
    if (client.isConnecting) connecting++;
    if (client.waitingToComeBack || client.isReconnecting) reconnecting++;
    if (client.expectedToKeepUp) {
      const seq = client.ledger.highestSeq;
      const seen = lowestSeqByRoom[client.room];
      lowestSeqByRoom[client.room] = seen === undefined ? seq : Math.min(seen, seq);
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
      if (client.group !== name || client.ledger.resumePoint() === undefined) continue;
      count++;
      addTotals(totals, client.ledger.settle(generations[client.room] ?? []));
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
