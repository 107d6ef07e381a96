/**
 * The monthly Cloudflare bill of a workload on the Workers Paid plan, line by
 * line, with the assumptions that produced it.
 */
import { fmt } from "./format";
import {
  acksPerConnection,
  deliveriesPerSecond,
  framesPerSocket,
  historyBytes,
  roomDemand,
  type RoomAssumptions,
  type UnitCosts,
  type Workload,
} from "./model";
import { overage, SECONDS_PER_MONTH, type Pricing } from "./pricing";

export interface CostAssumptions extends RoomAssumptions {
  /** Average life of a connection, s; each new one is an upgrade request (Worker + object). */
  sessionSeconds: number;
  /** Worker CPU per request, ms. */
  workerCpuMsPerRequest: number;
  /** Rooms keep their messages in memory only (HISTORY_RULES `"store": false`): no row written per message, nothing stored. */
  ephemeral?: boolean;
}

export interface CostLine {
  item: string;
  quantity: number;
  unit: string;
  included: number;
  usd: number;
}

export interface CostEstimate {
  lines: CostLine[];
  totalUsd: number;
  rooms: number;
  /** Share of the time an object is active (billed duration), 0..1. */
  activeShare: number;
  deliveriesPerMonth: number;
  publishesPerMonth: number;
  assumptions: string[];
}

/** Monthly Cloudflare cost of a workload on the Workers Paid plan. */
export function cloudflareMonthlyCost(w: Workload, costs: UnitCosts, pricing: Pricing, a: CostAssumptions): CostEstimate {
  const month = SECONDS_PER_MONTH;
  const C = w.connections;
  const m = w.messagesPerConnection;
  const rooms = Math.ceil(C / w.roomSize);
  const publishes = C * m * month;
  const upgrades = (C * month) / a.sessionSeconds;
  const httpPublishes = w.publishVia === "http" ? publishes : 0;
  const socketPublishes = w.publishVia === "socket" ? publishes : 0;
  const ackRate = acksPerConnection(w, a.rowsWrittenPerMessage, a.ack);
  const acks = C * ackRate * month;
  const pings = a.pingsBilled ? (C * month) / a.pingIntervalSeconds : 0;
  const incomingMessages = socketPublishes + acks + pings;

  const workerRequests = upgrades + httpPublishes;
  const workerCpuMs = workerRequests * a.workerCpuMsPerRequest;
  const doRequests = upgrades + httpPublishes + incomingMessages / pricing.doIncomingMessagesPerRequest;

  // An object is billed while a handler runs (fan-outs and acks); wall time ≈ CPU time for work in memory.
  const room = roomDemand(w, w.roomSize, costs, a);
  const activeShare = Math.min(1, room.cpuUsPerSecond / 1e6);
  const gbSeconds = rooms * activeShare * pricing.doBilledMemoryGb * month;

  const rowsWritten = a.ephemeral ? 0 : publishes * a.rowsWrittenPerMessage;
  const storedGb = a.ephemeral ? 0 : (rooms * historyBytes(w.payloadBytes, a.historyMessages)) / 1e9;
  const deliveries = deliveriesPerSecond(w) * month;

  const lines: CostLine[] = [
    { item: "Workers Paid subscription", quantity: 1, unit: "month", included: 0, usd: pricing.workersPaidMonthly },
    { item: "Worker requests (upgrades + HTTP publishes)", quantity: workerRequests, unit: "requests", included: pricing.workerRequestsIncluded, usd: overage(workerRequests, pricing.workerRequestsIncluded, pricing.workerRequestsPerMillion) },
    { item: "Worker CPU", quantity: workerCpuMs, unit: "CPU-ms", included: pricing.workerCpuMsIncluded, usd: overage(workerCpuMs, pricing.workerCpuMsIncluded, pricing.workerCpuMsPerMillion) },
    { item: `Durable Object requests (incoming messages at ${pricing.doIncomingMessagesPerRequest}:1)`, quantity: doRequests, unit: "requests", included: pricing.doRequestsIncluded, usd: overage(doRequests, pricing.doRequestsIncluded, pricing.doRequestsPerMillion) },
    { item: "Durable Object duration (active, not hibernated)", quantity: gbSeconds, unit: "GB-s", included: pricing.doGbSecondsIncluded, usd: overage(gbSeconds, pricing.doGbSecondsIncluded, pricing.doGbSecondsPerMillion) },
    { item: "SQLite rows written (history)", quantity: rowsWritten, unit: "rows", included: pricing.sqliteRowsWrittenIncluded, usd: overage(rowsWritten, pricing.sqliteRowsWrittenIncluded, pricing.sqliteRowsWrittenPerMillion) },
    { item: "SQLite stored data", quantity: storedGb, unit: "GB-month", included: pricing.sqliteStoredGbIncluded, usd: Math.max(0, storedGb - pricing.sqliteStoredGbIncluded) * pricing.sqliteStoredPerGbMonth },
    { item: "Outgoing WebSocket messages", quantity: deliveries, unit: "messages", included: 0, usd: 0 },
  ];
  const frames = framesPerSocket(w, a.rowsWrittenPerMessage);
  const perFrame = 1 / Math.max(1e-9, a.rowsWrittenPerMessage);
  const assumptions = [
    `30-day month (${month.toLocaleString("en-US")} s); prices: ${pricing.source}`,
    `${rooms.toLocaleString("en-US")} rooms of ${w.roomSize} sockets, one Durable Object each`,
    `each connection lives ${a.sessionSeconds} s on average: one upgrade request (Worker + object) per session`,
    `publishes arrive ${w.publishVia === "socket" ? "as socket frames (incoming messages, billed 20:1)" : "as HTTP requests (one Worker and one object request each)"}`,
    `each socket receives ${fmt(frames)} frames/s (one per flush: ${fmt(perFrame)} message${perFrame === 1 ? "" : "s"} per frame) and acks at most ${fmt(a.ack.delaySeconds * 1000)} ms after a frame or at half a ${fmt(a.ack.windowBytes / 1024)} KiB window: ${fmt(ackRate)} acks/s per connection (frames ÷ (1 + frames × delay))`,
    a.pingsBilled
      ? `the text heartbeat every ${a.pingIntervalSeconds} s counts as a billed incoming message, like an ack`
      : "the text heartbeat is not billed (answered by the runtime's auto-response)",
    `incoming socket messages a month: ${fmt(socketPublishes)} publishes, ${fmt(acks)} acks, ${fmt(pings)} heartbeats`,
    `an object is billed ${Math.round(pricing.doBilledMemoryGb * 1000)} MB only while handling: fan-outs and acks take ${fmt(room.cpuUsPerSecond / 1000)} ms per second per room (CPU measured locally, wall ≈ CPU) → active ${(activeShare * 100).toFixed(2)}% of the time`,
    a.ephemeral
      ? `ephemeral rooms (HISTORY_RULES "store": false): no SQLite row written per message and nothing stored; the last ${a.historyMessages} messages per room kept in memory`
      : `${fmt(a.rowsWrittenPerMessage)} SQLite row${a.rowsWrittenPerMessage === 1 ? "" : "s"} written per message (one row per flush), history of ${a.historyMessages} messages per room`,
    `Worker CPU ${a.workerCpuMsPerRequest} ms per request`,
  ];
  return { lines, totalUsd: lines.reduce((sum, l) => sum + l.usd, 0), rooms, activeShare, deliveriesPerMonth: deliveries, publishesPerMonth: publishes, assumptions };
}
