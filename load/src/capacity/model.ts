/**
 * Capacity arithmetic. Pure functions: every input is explicit, and every
 * resource line says what the workload asks of it (demand), what it has
 * (capacity), the share used (demand ÷ capacity) and, separately, the largest
 * workload that would fit (the ceiling).
 */
import { CLOUDFLARE_LIMITS, SECONDS_PER_MONTH } from "./pricing";
import { bitsPerSecond, bytes, cpuPerSecond, fmt, kb, mb } from "./format";

export interface Workload {
  connections: number;
  /** Messages each connection publishes per second. */
  messagesPerConnection: number;
  /** Sockets per room: every message is delivered to this many sockets (fan-out). */
  roomSize: number;
  payloadBytes: number;
  /** Publishes arrive as socket frames (billed 20:1) or as HTTP requests. */
  publishVia: "socket" | "http";
  /** Rooms (channels) when a connection follows several; absent: connections ÷ room size, one room each. */
  channels?: number;
}

/** Per-operation costs of the server, measured by the load tool or assumed. */
export interface UnitCosts {
  /** Server RSS per idle connection, bytes. */
  memoryPerConnectionBytes: number;
  /** Kernel socket memory per connection not visible in RSS, bytes. */
  kernelMemoryPerConnectionBytes: number;
  /** Server CPU per delivered message, µs. */
  cpuPerDeliveryUs: number;
  /** Server CPU per accepted publish, besides its deliveries, µs. */
  cpuPerPublishUs: number;
  /** Server CPU per incoming ack, µs. */
  cpuPerAckUs: number;
  handshakesPerSecond: number;
}

/**
 * How clients acknowledge: the SDK acks at most `delaySeconds` after a frame,
 * and at once when half the window is unacknowledged (0: no window). An
 * infinite delay with no window is a client that never acks.
 */
export interface AckPolicy {
  delaySeconds: number;
  windowBytes: number;
}

/** What a room does besides delivering, for a given workload. */
export interface RoomAssumptions {
  /** SQLite rows written per message = 1 ÷ messages per flush; each flush is also one frame per socket. */
  rowsWrittenPerMessage: number;
  ack: AckPolicy;
  /** Whether the text heartbeat counts as an incoming message (requests, billing). */
  pingsBilled: boolean;
  pingIntervalSeconds: number;
  historyMessages: number;
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

/** One resource: what the workload asks of it, what it has, and the largest workload that fits. */
export interface ResourceUse {
  resource: string;
  /** What the workload asks of the resource, in `unit`. */
  demand: number;
  /** What the resource provides, in `unit`. */
  capacity: number;
  unit: "descriptors" | "bytes" | "CPU µs/s" | "bit/s" | "sockets" | "requests/s";
  /** demand ÷ capacity: the share of this resource used; above 1 the workload does not fit. */
  used: number;
  /** The largest value of `ceilingOf` that fits this resource, all else equal. */
  ceiling: number;
  ceilingOf: "connections" | "sockets per room";
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

/** Messages each socket receives per second: everything its room publishes. */
export function messagesPerSocket(w: Workload): number {
  return w.messagesPerConnection * w.roomSize;
}

/** Frames each socket receives per second: one per flush of its room. */
export function framesPerSocket(w: Workload, rowsWrittenPerMessage: number): number {
  return messagesPerSocket(w) * Math.min(1, rowsWrittenPerMessage);
}

/**
 * Acks a client sends per second. Frames arriving at random at rate r with
 * an ack at most d after the first unacknowledged one: each ack cycle lasts d
 * plus the wait for the next frame (1/r on average), so r ÷ (1 + r·d); and at
 * least one per half window of bytes; never more than one per frame.
 */
export function acksPerConnection(w: Workload, rowsWrittenPerMessage: number, ack: AckPolicy): number {
  const r = framesPerSocket(w, rowsWrittenPerMessage);
  if (r <= 0) return 0;
  const timed = ack.delaySeconds > 0 ? r / (1 + r * ack.delaySeconds) : r;
  const byWindow = ack.windowBytes > 0 ? (messagesPerSocket(w) * deliveryWireBytes(w.payloadBytes)) / (ack.windowBytes / 2) : 0;
  return Math.min(r, Math.max(timed, byWindow));
}

/** Largest room (sockets) whose deliveries fit one thread, acks aside: m·F·(F·d + p) ≤ 1e6 µs per second. */
export function largestRoomForCpu(messagesPerConnection: number, cpuPerDeliveryUs: number, cpuPerPublishUs: number): number {
  const a = cpuPerDeliveryUs * messagesPerConnection;
  const b = cpuPerPublishUs * messagesPerConnection;
  if (a <= 0) return Number.POSITIVE_INFINITY;
  return (-b + Math.sqrt(b * b + 4 * a * 1e6)) / (2 * a);
}

/**
 * The largest x ≥ 0 with demand(x) ≤ capacity, for a demand that grows with
 * x; infinity when it never reaches the capacity.
 */
export function largestFitting(demand: (x: number) => number, capacity: number): number {
  if (demand(0) > capacity) return 0;
  let hi = 1;
  while (demand(hi) <= capacity) {
    hi *= 2;
    if (hi > 1e12) return Number.POSITIVE_INFINITY;
  }
  let lo = hi / 2;
  if (hi === 1) lo = 0;
  for (let i = 0; i < 200 && hi - lo > 1e-9 * hi; i++) {
    const mid = (lo + hi) / 2;
    if (demand(mid) <= capacity) lo = mid;
    else hi = mid;
  }
  return lo;
}

/** Reserve the local launcher keeps below the descriptor limit (mirrors its admission ceiling). */
export function descriptorCeiling(limit: number): number {
  return limit - Math.max(256, Math.ceil(limit * 0.05));
}

/** Memory a room's history holds, bytes (messages kept × stored size). */
export function historyBytes(payloadBytes: number, historyMessages: number): number {
  return historyMessages * (payloadBytes + 100);
}

/** What one room of `roomSize` sockets asks of the object (or thread) it runs on, per second. */
export interface RoomDemand {
  sockets: number;
  publishesPerSecond: number;
  acksPerSecond: number;
  pingsPerSecond: number;
  /** Incoming requests and socket messages: publishes, acks and (if counted) heartbeats. */
  requestsPerSecond: number;
  memoryBytes: number;
  cpuUsPerSecond: number;
}

export function roomDemand(w: Workload, roomSize: number, costs: UnitCosts, a: RoomAssumptions): RoomDemand {
  const room = { ...w, roomSize };
  const publishes = w.messagesPerConnection * roomSize;
  const acks = roomSize * acksPerConnection(room, a.rowsWrittenPerMessage, a.ack);
  const pings = a.pingsBilled && a.pingIntervalSeconds > 0 ? roomSize / a.pingIntervalSeconds : 0;
  return {
    sockets: roomSize,
    publishesPerSecond: publishes,
    acksPerSecond: acks,
    pingsPerSecond: pings,
    requestsPerSecond: publishes + acks + pings,
    memoryBytes: roomSize * costs.memoryPerConnectionBytes + historyBytes(w.payloadBytes, a.historyMessages),
    cpuUsPerSecond: publishes * (roomSize * costs.cpuPerDeliveryUs + costs.cpuPerPublishUs) + acks * costs.cpuPerAckUs,
  };
}

function use(line: Omit<ResourceUse, "used">): ResourceUse {
  return { ...line, used: line.capacity > 0 ? line.demand / line.capacity : Number.POSITIVE_INFINITY };
}

/** What one connection asks of a self-hosted server per second (its share of its room's work). */
export interface ConnectionDemand {
  memoryBytes: number;
  cpuUsPerSecond: number;
  bitsPerSecond: number;
  acksPerSecond: number;
}

export function connectionDemand(w: Workload, costs: UnitCosts, a: RoomAssumptions): ConnectionDemand {
  const m = w.messagesPerConnection;
  const acks = acksPerConnection(w, a.rowsWrittenPerMessage, a.ack);
  return {
    memoryBytes: costs.memoryPerConnectionBytes + costs.kernelMemoryPerConnectionBytes,
    // Its publishes fan out to the room, and the server reads its acks.
    cpuUsPerSecond: m * (w.roomSize * costs.cpuPerDeliveryUs + costs.cpuPerPublishUs) + acks * costs.cpuPerAckUs,
    bitsPerSecond: messagesPerSocket(w) * deliveryWireBytes(w.payloadBytes) * 8,
    acksPerSecond: acks,
  };
}

/** Resources of one self-hosted server process on `host`. */
export function selfHostedResources(w: Workload, costs: UnitCosts, host: Host, a: RoomAssumptions): ResourceUse[] {
  const c = w.connections;
  const per = connectionDemand(w, costs, a);
  const fds = descriptorCeiling(host.descriptorLimit);
  const threadUs = host.serverThreads * 1e6;
  const room = roomDemand(w, w.roomSize, costs, a);
  const ceilingOf = (perConnection: number, capacity: number): number => (perConnection > 0 ? capacity / perConnection : Number.POSITIVE_INFINITY);
  return [
    use({
      resource: "descriptors",
      demand: c,
      capacity: fds,
      unit: "descriptors",
      ceiling: fds,
      ceilingOf: "connections",
      detail: `1 per connection; limit ${fmt(host.descriptorLimit)} minus the launcher's reserve`,
    }),
    use({
      resource: "memory",
      demand: c * per.memoryBytes,
      capacity: host.memoryBytes,
      unit: "bytes",
      ceiling: ceilingOf(per.memoryBytes, host.memoryBytes),
      ceilingOf: "connections",
      detail: `${kb(per.memoryBytes)} per connection (RSS ${kb(costs.memoryPerConnectionBytes)} + kernel ${kb(costs.kernelMemoryPerConnectionBytes)})`,
    }),
    use({
      resource: `CPU of ${host.serverThreads === 1 ? "the thread" : `${host.serverThreads} threads`}`,
      demand: c * per.cpuUsPerSecond,
      capacity: threadUs,
      unit: "CPU µs/s",
      ceiling: ceilingOf(per.cpuUsPerSecond, threadUs),
      ceilingOf: "connections",
      detail: `${fmt(per.cpuUsPerSecond)} µs/s per connection: ${fmt(messagesPerSocket(w))} deliveries/s × ${fmt(costs.cpuPerDeliveryUs)} µs + ${fmt(w.messagesPerConnection)} publishes/s × ${fmt(costs.cpuPerPublishUs)} µs + ${fmt(per.acksPerSecond)} acks/s × ${fmt(costs.cpuPerAckUs)} µs`,
    }),
    use({
      resource: "network link",
      demand: c * per.bitsPerSecond,
      capacity: host.linkBitsPerSecond,
      unit: "bit/s",
      ceiling: ceilingOf(per.bitsPerSecond, host.linkBitsPerSecond),
      ceilingOf: "connections",
      detail: `${bitsPerSecond(per.bitsPerSecond)} out per connection (${deliveryWireBytes(w.payloadBytes)} B on the wire per delivery)`,
    }),
    use({
      resource: "one room on one thread",
      demand: room.cpuUsPerSecond,
      capacity: 1e6,
      unit: "CPU µs/s",
      ceiling: largestFitting((f) => roomDemand(w, f, costs, a).cpuUsPerSecond, 1e6),
      ceilingOf: "sockets per room",
      detail: `a room's m·F² deliveries/s (${fmt(room.publishesPerSecond * w.roomSize)}) and its acks run on one thread; grows with the square of the room size`,
    }),
  ];
}

/**
 * Resources of one room on Cloudflare (one Durable Object per room). The
 * service scales out by rooms, so these bound the room size, not the total.
 */
export function cloudflareRoomResources(w: Workload, costs: UnitCosts, a: RoomAssumptions): ResourceUse[] {
  const F = w.roomSize;
  const room = roomDemand(w, F, costs, a);
  const at = (f: number): RoomDemand => roomDemand(w, f, costs, a);
  const history = historyBytes(w.payloadBytes, a.historyMessages);
  return [
    use({
      resource: "sockets per object",
      demand: F,
      capacity: CLOUDFLARE_LIMITS.socketsPerObject,
      unit: "sockets",
      ceiling: CLOUDFLARE_LIMITS.socketsPerObject,
      ceilingOf: "sockets per room",
      detail: "hibernatable WebSockets per Durable Object",
    }),
    use({
      resource: "requests/s per object",
      demand: room.requestsPerSecond,
      capacity: CLOUDFLARE_LIMITS.requestsPerSecondPerObject,
      unit: "requests/s",
      ceiling: largestFitting((f) => at(f).requestsPerSecond, CLOUDFLARE_LIMITS.requestsPerSecondPerObject),
      ceilingOf: "sockets per room",
      detail: `${fmt(room.publishesPerSecond)} publishes + ${fmt(room.acksPerSecond)} acks${room.pingsPerSecond > 0 ? ` + ${fmt(room.pingsPerSecond)} heartbeats` : ""} per second (soft limit)`,
    }),
    use({
      resource: "memory of one object",
      demand: room.memoryBytes,
      capacity: CLOUDFLARE_LIMITS.memoryPerObjectBytes,
      unit: "bytes",
      ceiling: largestFitting((f) => at(f).memoryBytes, CLOUDFLARE_LIMITS.memoryPerObjectBytes),
      ceilingOf: "sockets per room",
      detail: `${kb(costs.memoryPerConnectionBytes)} per socket (measured RSS, an upper bound for the isolate) + ${bytes(history)} history, of ${mb(CLOUDFLARE_LIMITS.memoryPerObjectBytes)}`,
    }),
    use({
      resource: "CPU of one object",
      demand: room.cpuUsPerSecond,
      capacity: 1e6,
      unit: "CPU µs/s",
      ceiling: largestFitting((f) => at(f).cpuUsPerSecond, 1e6),
      ceilingOf: "sockets per room",
      detail: `${fmt(room.publishesPerSecond * F)} deliveries/s × ${fmt(costs.cpuPerDeliveryUs)} µs + ${fmt(room.acksPerSecond)} acks/s × ${fmt(costs.cpuPerAckUs)} µs on one thread (${cpuPerSecond(room.cpuUsPerSecond)}; CPU measured on this machine)`,
    }),
  ];
}

/** The resource with the highest share used. */
export function mostUsed(resources: readonly ResourceUse[]): ResourceUse {
  return [...resources].sort((a, b) => b.used - a.used)[0] as ResourceUse;
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
export function vpsEstimate(w: Workload, costs: UnitCosts, offer: VpsOffer, a: RoomAssumptions): VpsEstimate {
  const resources = selfHostedResources(w, costs, offer, a);
  // Servers add connections, not room size: the connection-bound resources decide how many.
  const binding = mostUsed(resources.filter((r) => r.ceilingOf === "connections"));
  const servers = Math.max(1, Math.ceil(binding.used - 1e-9));
  const outgoing = deliveriesPerSecond(w) * deliveryWireBytes(w.payloadBytes) * SECONDS_PER_MONTH;
  const overageGb = Math.max(0, outgoing - servers * offer.transferBytesPerMonth) / 1e9;
  const transferOverageUsd = overageGb * offer.transferOverageUsdPerGb;
  const room = resources.find((r) => r.ceilingOf === "sockets per room");
  return {
    offer,
    servers,
    bindingResource: binding.resource,
    outgoingBytesPerMonth: outgoing,
    transferOverageUsd,
    monthlyUsd: servers * offer.monthlyUsd + transferOverageUsd,
    fitsOneRoom: room === undefined || room.used <= 1,
  };
}
