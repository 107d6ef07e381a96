/**
 * Capacity and cost arithmetic. Pure functions: every input is explicit, every
 * result says which resource it is about, and the cost comes with the
 * assumptions that produced it.
 */
import { CLOUDFLARE_LIMITS, SECONDS_PER_MONTH, type Pricing } from "./pricing";

export interface Workload {
  connections: number;
  /** Messages each connection publishes per second. */
  messagesPerConnection: number;
  /** Sockets per room: every message is delivered to this many sockets (fan-out). */
  roomSize: number;
  payloadBytes: number;
  /** Publishes arrive as socket frames (billed 20:1) or as HTTP requests. */
  publishVia: "socket" | "http";
}

/** Per-operation costs of the server, measured by the load tool or assumed. */
export interface UnitCosts {
  /** Server RSS per idle connection, bytes. */
  memoryPerConnectionBytes: number;
  /** Kernel socket memory per connection not visible in RSS, bytes. */
  kernelMemoryPerConnectionBytes: number;
  /** Server CPU per delivered message (one frame per message), µs. */
  cpuPerDeliveryUs: number;
  /** Server CPU per accepted publish, besides its deliveries, µs. */
  cpuPerPublishUs: number;
  handshakesPerSecond: number;
}

/** A machine that runs the server itself (this one, or a VPS). */
export interface Host {
  name: string;
  descriptorLimit: number;
  /** Memory the server may use, bytes. */
  memoryBytes: number;
  /** Threads the server's message handling runs on (workerd and Node: 1 per process). */
  serverThreads: number;
  linkBitsPerSecond: number;
}

export interface Ceiling {
  /** What runs out. */
  resource: string;
  /** Demand divided by capacity: above 1 the workload does not fit. */
  utilization: number;
  /** The largest value of `limitOf` that fits, all else equal. */
  limit: number;
  /** What `limit` counts: "connections" or "sockets per room". */
  limitOf: "connections" | "sockets per room";
  detail: string;
}

/** Bytes of one message event frame on the wire: JSON envelope + WebSocket header + TCP/IP/Ethernet. */
export function deliveryWireBytes(payloadBytes: number): number {
  const envelope = payloadBytes + 58; // {"type":"message","seq":1234567,"data":…,"ts":1700000000000}
  const wsHeader = envelope < 126 ? 2 : envelope < 65_536 ? 4 : 10;
  const packet = 66; // IPv4 20 + TCP 32 (timestamps) + Ethernet 14
  return envelope + wsHeader + packet;
}

/** Deliveries per second across the whole service: connections × messages per connection × fan-out. */
export function deliveriesPerSecond(w: Workload): number {
  return w.connections * w.messagesPerConnection * w.roomSize;
}

/** Acks a well-behaved client sends per second: one per `ackBytes` received. */
export function acksPerConnection(w: Workload, ackBytes: number): number {
  return (w.messagesPerConnection * w.roomSize * deliveryWireBytes(w.payloadBytes)) / ackBytes;
}

/** Largest room (sockets) whose deliveries fit one thread: m·F·(F·d + p) ≤ 1e6 µs per second. */
export function largestRoomForCpu(messagesPerConnection: number, cpuPerDeliveryUs: number, cpuPerPublishUs: number): number {
  const a = cpuPerDeliveryUs * messagesPerConnection;
  const b = cpuPerPublishUs * messagesPerConnection;
  if (a <= 0) return Number.POSITIVE_INFINITY;
  return (-b + Math.sqrt(b * b + 4 * a * 1e6)) / (2 * a);
}

/** Reserve the local launcher keeps below the descriptor limit (mirrors its admission ceiling). */
export function descriptorCeiling(limit: number): number {
  return limit - Math.max(256, Math.ceil(limit * 0.05));
}

/** Ceilings of one self-hosted server process on `host`, each as a utilisation of the workload. */
export function selfHostedCeilings(w: Workload, costs: UnitCosts, host: Host): Ceiling[] {
  const m = w.messagesPerConnection;
  const perConnCpu = m * w.roomSize * costs.cpuPerDeliveryUs + m * costs.cpuPerPublishUs; // µs per second
  const perConnMem = costs.memoryPerConnectionBytes + costs.kernelMemoryPerConnectionBytes;
  const perConnBytes = m * w.roomSize * deliveryWireBytes(w.payloadBytes); // outgoing bytes per second
  const fdLimit = descriptorCeiling(host.descriptorLimit);
  const memLimit = host.memoryBytes / perConnMem;
  const cpuLimit = perConnCpu > 0 ? (host.serverThreads * 1e6) / perConnCpu : Number.POSITIVE_INFINITY;
  const netLimit = perConnBytes > 0 ? host.linkBitsPerSecond / 8 / perConnBytes : Number.POSITIVE_INFINITY;
  const roomLimit = largestRoomForCpu(m, costs.cpuPerDeliveryUs, costs.cpuPerPublishUs);
  const c = w.connections;
  return [
    { resource: "descriptors", limitOf: "connections", limit: fdLimit, utilization: c / fdLimit, detail: `1 per connection, limit ${host.descriptorLimit} minus reserve` },
    { resource: "memory", limitOf: "connections", limit: memLimit, utilization: c / memLimit, detail: `${kb(perConnMem)} per connection (RSS ${kb(costs.memoryPerConnectionBytes)} + kernel ${kb(costs.kernelMemoryPerConnectionBytes)}) of ${mb(host.memoryBytes)}` },
    { resource: "CPU (deliveries)", limitOf: "connections", limit: cpuLimit, utilization: c / cpuLimit, detail: `${fmt(perConnCpu)} µs/s per connection (${fmt(m * w.roomSize)} deliveries/s × ${fmt(costs.cpuPerDeliveryUs)} µs + publishes) on ${host.serverThreads} thread(s)` },
    { resource: "network link", limitOf: "connections", limit: netLimit, utilization: c / netLimit, detail: `${fmt(perConnBytes)} B/s out per connection (${deliveryWireBytes(w.payloadBytes)} B per delivery) on ${fmt(host.linkBitsPerSecond / 1e6)} Mbit/s` },
    { resource: "one room on one thread", limitOf: "sockets per room", limit: roomLimit, utilization: w.roomSize / roomLimit, detail: `a room's m·F² deliveries/s must fit one thread` },
  ];
}

/** Memory a room's history holds, bytes (messages kept × stored size). */
export function historyBytes(payloadBytes: number, historyMessages: number): number {
  return historyMessages * (payloadBytes + 100);
}

/**
 * Ceilings of one room on Cloudflare (one Durable Object per room). The
 * service scales out by rooms, so these bound the room size, not the total.
 */
export function cloudflareRoomCeilings(w: Workload, costs: UnitCosts, ackBytes: number, historyMessages: number): Ceiling[] {
  const F = w.roomSize;
  const m = w.messagesPerConnection;
  const ackRate = acksPerConnection(w, ackBytes);
  const requestsPerConn = m + ackRate; // incoming socket frames or HTTP publishes, plus acks
  const requestLimit = CLOUDFLARE_LIMITS.requestsPerSecondPerObject / requestsPerConn;
  const history = historyBytes(w.payloadBytes, historyMessages);
  const memLimit = (CLOUDFLARE_LIMITS.memoryPerObjectBytes - history) / costs.memoryPerConnectionBytes;
  const cpuLimit = largestRoomForCpu(m, costs.cpuPerDeliveryUs, costs.cpuPerPublishUs);
  return [
    { resource: "sockets per object", limitOf: "sockets per room", limit: CLOUDFLARE_LIMITS.socketsPerObject, utilization: F / CLOUDFLARE_LIMITS.socketsPerObject, detail: "hibernatable WebSockets per Durable Object" },
    { resource: "requests/s per object", limitOf: "sockets per room", limit: requestLimit, utilization: F / requestLimit, detail: `${fmt(requestsPerConn * F)} incoming/s per room vs soft limit ${CLOUDFLARE_LIMITS.requestsPerSecondPerObject}` },
    { resource: "128 MB per object", limitOf: "sockets per room", limit: memLimit, utilization: F / memLimit, detail: `${kb(costs.memoryPerConnectionBytes)} per socket (measured RSS, an upper bound for the isolate) + ${kb(history)} history` },
    { resource: "frames/s per object (CPU)", limitOf: "sockets per room", limit: cpuLimit, utilization: F / cpuLimit, detail: `${fmt(m * F * F)} deliveries/s per room × ${fmt(costs.cpuPerDeliveryUs)} µs on one thread (CPU measured on this machine)` },
  ];
}

/** The ceiling reached first: highest utilisation. */
export function lowestCeiling(ceilings: readonly Ceiling[]): Ceiling {
  return [...ceilings].sort((a, b) => b.utilization - a.utilization)[0] as Ceiling;
}

export interface CostAssumptions {
  /** Average life of a connection, s; each new one is an upgrade request (Worker + object). */
  sessionSeconds: number;
  /** Worker CPU per request, ms. */
  workerCpuMsPerRequest: number;
  /** SQLite rows written per message: the history is a ring, so a publish overwrites one slot. */
  rowsWrittenPerMessage: number;
  /** Whether the text heartbeat counts as a billed incoming message (auto-responses are not documented either way). */
  pingsBilled: boolean;
  pingIntervalSeconds: number;
  historyMessages: number;
  ackBytes: number;
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
  assumptions: string[];
}

function overage(quantity: number, included: number, perMillion: number): number {
  return (Math.max(0, quantity - included) / 1e6) * perMillion;
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
  const acks = C * acksPerConnection(w, a.ackBytes) * month;
  const pings = a.pingsBilled ? (C * month) / a.pingIntervalSeconds : 0;
  const incomingMessages = socketPublishes + acks + pings;

  const workerRequests = upgrades + httpPublishes;
  const workerCpuMs = workerRequests * a.workerCpuMsPerRequest;
  const doRequests = upgrades + httpPublishes + incomingMessages / pricing.doIncomingMessagesPerRequest;

  // An object is billed while a handler runs: each publish costs its fan-out's CPU time (wall ≈ CPU in memory).
  const publishesPerRoom = m * w.roomSize;
  const handlerSeconds = (w.roomSize * costs.cpuPerDeliveryUs + costs.cpuPerPublishUs) / 1e6;
  const activeShare = Math.min(1, publishesPerRoom * handlerSeconds);
  const gbSeconds = rooms * activeShare * pricing.doBilledMemoryGb * month;

  const rowsWritten = publishes * a.rowsWrittenPerMessage;
  const storedGb = (rooms * historyBytes(w.payloadBytes, a.historyMessages)) / 1e9;

  const lines: CostLine[] = [
    { item: "Workers Paid subscription", quantity: 1, unit: "month", included: 0, usd: pricing.workersPaidMonthly },
    { item: "Worker requests (upgrades + HTTP publishes)", quantity: workerRequests, unit: "requests", included: pricing.workerRequestsIncluded, usd: overage(workerRequests, pricing.workerRequestsIncluded, pricing.workerRequestsPerMillion) },
    { item: "Worker CPU", quantity: workerCpuMs, unit: "CPU-ms", included: pricing.workerCpuMsIncluded, usd: overage(workerCpuMs, pricing.workerCpuMsIncluded, pricing.workerCpuMsPerMillion) },
    { item: `Durable Object requests (incoming messages at ${pricing.doIncomingMessagesPerRequest}:1)`, quantity: doRequests, unit: "requests", included: pricing.doRequestsIncluded, usd: overage(doRequests, pricing.doRequestsIncluded, pricing.doRequestsPerMillion) },
    { item: "Durable Object duration (active, not hibernated)", quantity: gbSeconds, unit: "GB-s", included: pricing.doGbSecondsIncluded, usd: overage(gbSeconds, pricing.doGbSecondsIncluded, pricing.doGbSecondsPerMillion) },
    { item: "SQLite rows written (history)", quantity: rowsWritten, unit: "rows", included: pricing.sqliteRowsWrittenIncluded, usd: overage(rowsWritten, pricing.sqliteRowsWrittenIncluded, pricing.sqliteRowsWrittenPerMillion) },
    { item: "SQLite stored data", quantity: storedGb, unit: "GB-month", included: pricing.sqliteStoredGbIncluded, usd: Math.max(0, storedGb - pricing.sqliteStoredGbIncluded) * pricing.sqliteStoredPerGbMonth },
    { item: "Outgoing WebSocket messages", quantity: deliveriesPerSecond(w) * month, unit: "messages", included: 0, usd: 0 },
  ];
  const assumptions = [
    `30-day month (${month.toLocaleString("en-US")} s); prices: ${pricing.source}`,
    `${rooms.toLocaleString("en-US")} rooms of ${w.roomSize} sockets, one Durable Object each`,
    `each connection lives ${a.sessionSeconds} s on average: one upgrade request (Worker + object) per session`,
    `publishes arrive ${w.publishVia === "socket" ? "as socket frames (incoming messages, billed 20:1)" : "as HTTP requests (one Worker and one object request each)"}`,
    `clients ack every ${Math.round(a.ackBytes / 1024)} KiB received: ${fmt(acksPerConnection(w, a.ackBytes))} acks/s per connection`,
    a.pingsBilled
      ? `the text heartbeat every ${a.pingIntervalSeconds} s is counted as a billed incoming message (conservative: it is answered by the runtime without waking the object, and protocol-level pings are documented as free)`
      : "the text heartbeat is not billed (answered by the runtime's auto-response)",
    `an object is billed 128 MB only while handling: ${fmt(handlerSeconds * 1e3)} ms per publish (fan-out CPU measured locally) → active ${(activeShare * 100).toFixed(1)}% of the time`,
    `${a.rowsWrittenPerMessage} SQLite rows written per message (one ring slot), history of ${a.historyMessages} messages per room`,
    `Worker CPU ${a.workerCpuMsPerRequest} ms per request`,
  ];
  return { lines, totalUsd: lines.reduce((sum, l) => sum + l.usd, 0), rooms, activeShare, assumptions };
}

export interface VpsOffer extends Host {
  monthlyUsd: number;
  /** Outgoing transfer included per server and month, bytes. */
  transferBytesPerMonth: number;
  /** Price of transfer beyond the included amount, USD per GB. */
  transferOverageUsdPerGb: number;
}

export interface VpsEstimate {
  offer: VpsOffer;
  /** Servers the connections need (descriptors, memory, CPU, link). */
  servers: number;
  /** What decides the number of servers. */
  bindingResource: string;
  outgoingBytesPerMonth: number;
  transferOverageUsd: number;
  monthlyUsd: number;
  fitsOneRoom: boolean;
}

/** How many fixed-price servers the workload needs, given per-connection costs, plus transfer beyond what they include. */
export function vpsEstimate(w: Workload, costs: UnitCosts, offer: VpsOffer): VpsEstimate {
  const ceilings = selfHostedCeilings(w, costs, offer).filter((c) => c.limitOf === "connections");
  const binding = [...ceilings].sort((a, b) => b.utilization - a.utilization)[0] as Ceiling;
  const servers = Math.max(1, Math.ceil(binding.utilization - 1e-9));
  const outgoing = deliveriesPerSecond(w) * deliveryWireBytes(w.payloadBytes) * SECONDS_PER_MONTH;
  const overageGb = Math.max(0, outgoing - servers * offer.transferBytesPerMonth) / 1e9;
  const transferOverageUsd = overageGb * offer.transferOverageUsdPerGb;
  const roomCeiling = largestRoomForCpu(w.messagesPerConnection, costs.cpuPerDeliveryUs, costs.cpuPerPublishUs);
  return {
    offer,
    servers,
    bindingResource: binding.resource,
    outgoingBytesPerMonth: outgoing,
    transferOverageUsd,
    monthlyUsd: servers * offer.monthlyUsd + transferOverageUsd,
    fitsOneRoom: w.roomSize <= roomCeiling,
  };
}

function fmt(v: number): string {
  if (!Number.isFinite(v)) return "∞";
  if (Math.abs(v) >= 100) return Math.round(v).toLocaleString("en-US");
  return Number(v.toPrecision(3)).toString();
}

function kb(bytes: number): string {
  return `${(bytes / 1024).toFixed(1)} KB`;
}

function mb(bytes: number): string {
  return `${Math.round(bytes / 1048576).toLocaleString("en-US")} MB`;
}
