/**
 * Multiplexed connections on Cloudflare (docs/multiplexing.md): C connections
 * that each follow K rooms of F followers, priced in four designs that carry
 * the same subscriptions:
 *
 * - hubs (what the service runs): H objects hold the connections; a room's
 *   flush is one push (an RPC, a billed request) to each hub that follows it,
 *   H·(1 − (1 − 1/H)^F) of them, and each hub sends one frame per follower;
 * - an object per connection: a room's flush is one push per follower;
 * - the Worker holding the client's socket, with one internal socket per
 *   subscribed room into the room objects (the room sends as to its own
 *   sockets; the Worker relays each frame);
 * - single-room sockets: C·K sockets, each room's followers on its object.
 *
 * Built from per-step costs (measured locally by load/bench/multiplex.ts, or
 * the defaults cited beside them) and the platform's published prices and
 * limits; every figure says where it came from.
 */
import { overage, SECONDS_PER_MONTH, type Pricing } from "./pricing";

/** Platform bounds the designs meet. */
export const MUX_LIMITS = {
  /** Hibernatable WebSockets per object. */
  socketsPerObject: 32_768,
  /** MAX_CONNECTIONS_PER_HUB upper bound (common/settings.ts: the platform's bound with a margin). */
  connectionsPerHubMax: 32_000,
  /** MULTIPLEX_HUBS upper bound (common/settings.ts). */
  hubsMax: 1024,
  /** Subrequests per invocation on Workers Paid. */
  subrequestsPerInvocation: 10_000,
  /** Simultaneous outgoing connections per invocation (a Worker's open internal sockets count). */
  openConnectionsPerInvocation: 6,
  /** Soft limit of requests per second one object handles. */
  requestsPerSecondPerObject: 1000,
  /** CPU time of one Worker invocation on Workers Paid: 30 s by default, 5 minutes at most. */
  workerCpuSecondsDefault: 30,
  workerCpuSecondsMax: 300,
} as const;

export interface MuxShape {
  connections: number;
  roomsPerConnection: number;
  /** Followers of each room (its fan-out). */
  followersPerRoom: number;
  /** Messages per second into each room. */
  roomRate: number;
  /** Publishes arrive as HTTP requests (the Worker, then the room) or as socket frames. */
  publishVia: "http" | "socket";
  /** MULTIPLEX_HUBS; 0 = the fewest that hold the connections and keep each hub's thread within `hubBudget`. */
  hubs: number;
  /** MAX_CONNECTIONS_PER_HUB. */
  maxConnectionsPerHub: number;
  /** Share of a hub's thread its work may take when choosing the number of hubs (0..1). */
  hubBudget: number;
  /** SQLite rows a room writes per message = 1 ÷ messages per flush; each flush is one frame per follower. */
  rowsPerMessage: number;
  /** Seconds a connection lives (one upgrade per session). */
  sessionSeconds: number;
  /** Whether the text heartbeat is a billed incoming message. */
  pingsBilled: boolean;
  pingIntervalSeconds: number;
  /** Acks a client sends per second for a number of frames per second (SDK: frames ÷ (1 + frames × delay)). */
  acksAt: (framesPerSecond: number) => number;
}

export interface MuxCosts {
  /** CPU of one delivery (one frame to one socket) in the object that holds the socket, µs. */
  sendUs: number;
  /** CPU per flush in the room besides pushes and sends (seq, history row, the publish), µs. */
  flushUs: number;
  /** Room CPU to issue one push RPC, µs. */
  pushIssueUs: number;
  /** CPU of receiving one push (besides its sends), µs. */
  pushReceiveUs: number;
  ackUs: number;
  /** Worker CPU to relay one frame from a room's internal socket to the client's socket, µs. */
  relayUs: number;
  /** One-way latency of an RPC between two objects near each other, ms. */
  rpcLatencyMs: number;
  /** Worker CPU per upgrade and per HTTP publish, ms. */
  workerCpuMsPerRequest: number;
}

export interface LimitCheck {
  name: string;
  value: number;
  limit: number;
  ok: boolean;
}

export type DesignName = "hubs" | "object per connection" | "Worker-held socket" | "single-room sockets";

export interface BillLine {
  item: string;
  quantity: number;
  usd: number;
}

export interface DesignEstimate {
  design: DesignName;
  /** Objects that hold client sockets (hubs, connection objects, rooms), and the rooms themselves. */
  socketObjects: number;
  /** Client sockets the platform holds. */
  clientSockets: number;
  /** Pushes (object-to-object RPCs) per second, over all rooms. */
  pushesPerSecond: number;
  /** Pushes per room flush. */
  pushesPerFlush: number;
  /** CPU per delivery over every object (and the Worker) that touched it, µs: the model's figure. */
  cpuPerDeliveryUs: number;
  /** Latency one delivery gets beyond single-room sockets, ms (a push's hop and its receive). */
  addedLatencyMs: number;
  /** Whether an idle connection costs no duration (every object that holds it can hibernate). */
  idleHibernates: boolean;
  /** Share of its thread the busiest object uses (1 = saturated: flushes coalesce, latency grows). */
  busiestObjectCpuShare: number;
  busiestObject: string;
  limits: LimitCheck[];
  monthly: BillLine[];
  monthlyUsd: number;
  usdPerMillionDelivered: number;
  /** What one idle connection (K subscriptions, no messages) costs a month, USD, beyond the plan's allowances. */
  idleConnectionMonthUsd: number;
  /** What a lost object drops: the connections it held. */
  lostObjectDrops: number;
  notes: string[];
}

export interface MuxEstimate {
  shape: MuxShape;
  rooms: number;
  hubs: number;
  /** Hubs that follow one room: H·(1 − (1 − 1/H)^F), the connections placed at random. */
  hubsPerRoom: number;
  connectionsPerHub: number;
  flushesPerRoomPerSecond: number;
  deliveriesPerSecond: number;
  designs: DesignEstimate[];
}

/** Expected distinct hubs among `followers` connections placed uniformly at random on `hubs` hubs. */
export function hubsFollowing(hubs: number, followers: number): number {
  if (hubs <= 1) return Math.min(1, followers);
  return hubs * (1 - (1 - 1 / hubs) ** followers);
}

/** Months of a connection: a session's upgrade, heartbeats; what one costs idle at the marginal (past-allowance) prices. */
function idleMonthUsd(p: Pricing, upgradesWorker: number, upgradesObject: number, incomingMessages: number, workerCpuMs: number): number {
  const doRequests = upgradesObject + incomingMessages / p.doIncomingMessagesPerRequest;
  return (upgradesWorker * p.workerRequestsPerMillion + doRequests * p.doRequestsPerMillion + workerCpuMs * p.workerCpuMsPerMillion) / 1e6;
}

interface Common {
  rooms: number;
  flushes: number;
  publishes: number;
  deliveries: number;
  month: number;
}

function bill(p: Pricing, parts: { workerRequests: number; workerCpuMs: number; doRequests: number; gbSeconds: number; rows: number; pushes: number }): { lines: BillLine[]; total: number } {
  const lines: BillLine[] = [
    { item: "Workers Paid subscription", quantity: 1, usd: p.workersPaidMonthly },
    { item: "Worker requests (upgrades, HTTP publishes)", quantity: parts.workerRequests, usd: overage(parts.workerRequests, p.workerRequestsIncluded, p.workerRequestsPerMillion) },
    { item: "Worker CPU", quantity: parts.workerCpuMs, usd: overage(parts.workerCpuMs, p.workerCpuMsIncluded, p.workerCpuMsPerMillion) },
    { item: `Durable Object requests (incoming socket messages at ${p.doIncomingMessagesPerRequest}:1)`, quantity: parts.doRequests, usd: overage(parts.doRequests, p.doRequestsIncluded, p.doRequestsPerMillion) },
    { item: "  of which pushes (room -> holder of the sockets)", quantity: parts.pushes, usd: (parts.pushes / 1e6) * p.doRequestsPerMillion },
    { item: "Durable Object duration (active share)", quantity: parts.gbSeconds, usd: overage(parts.gbSeconds, p.doGbSecondsIncluded, p.doGbSecondsPerMillion) },
    { item: "SQLite rows written (one per flush)", quantity: parts.rows, usd: overage(parts.rows, p.sqliteRowsWrittenIncluded, p.sqliteRowsWrittenPerMillion) },
    // Live deliveries read nothing: a hub catches up from its ring, a room serves resumes from memory first.
    { item: "SQLite rows read (live delivery)", quantity: 0, usd: 0 },
  ];
  return { lines, total: lines.filter((l) => !l.item.startsWith("  ")).reduce((sum, l) => sum + l.usd, 0) };
}

/** The fewest hubs that hold the connections (with room to place them at random) and keep each within its budget. */
export function hubsFor(shape: MuxShape, costs: MuxCosts, common: Pick<Common, "rooms" | "flushes" | "deliveries">): number {
  if (shape.hubs > 0) return shape.hubs;
  // Connections go to a hub at random with three tries: keep hubs at most 80% full.
  let hubs = Math.max(16, Math.ceil(shape.connections / (0.8 * shape.maxConnectionsPerHub)));
  for (; hubs < MUX_LIMITS.hubsMax; hubs++) {
    if (hubCpuPerSecond(shape, costs, common, hubs) / hubs <= shape.hubBudget * 1e6) break;
  }
  return hubs;
}

function hubCpuPerSecond(shape: MuxShape, costs: MuxCosts, common: Pick<Common, "rooms" | "flushes" | "deliveries">, hubs: number): number {
  const frames = shape.roomsPerConnection * common.flushes;
  const acks = shape.connections * shape.acksAt(frames);
  const pushes = common.rooms * common.flushes * hubsFollowing(hubs, shape.followersPerRoom);
  return (common.deliveries * shape.rowsPerMessage) * costs.sendUs + pushes * costs.pushReceiveUs + acks * costs.ackUs;
}

/** Prices the multiplexed workload in every design. */
export function multiplexedFanout(shape: MuxShape, costs: MuxCosts, p: Pricing): MuxEstimate {
  const C = shape.connections;
  const K = shape.roomsPerConnection;
  const F = shape.followersPerRoom;
  const r = shape.roomRate;
  const month = SECONDS_PER_MONTH;
  const rooms = Math.ceil((C * K) / F);
  const flushes = r * Math.min(1, shape.rowsPerMessage);
  const perFlush = flushes > 0 ? r / flushes : 1;
  const publishes = rooms * r;
  const deliveries = rooms * r * F;
  const common: Common = { rooms, flushes, publishes, deliveries, month };
  // Frames: one per flush per follower; a send costs per frame, whatever it carries.
  const frameSends = rooms * flushes * F;
  const sendCpuPerDelivery = (frameSends * costs.sendUs) / Math.max(1e-9, deliveries);
  const httpPublishes = shape.publishVia === "http" ? publishes : 0;
  const socketPublishes = shape.publishVia === "socket" ? publishes : 0;
  const roomsRows = rooms * flushes * month;
  const roomFlushCpu = (pushesPerFlush: number) => flushes * (costs.flushUs + pushesPerFlush * costs.pushIssueUs);
  const roomActive = (pushesPerFlush: number, sends: number) =>
    Math.min(1, (roomFlushCpu(pushesPerFlush) + flushes * sends * costs.sendUs) / 1e6 + (pushesPerFlush > 0 ? (flushes * costs.rpcLatencyMs) / 1000 : 0));
  const pingsPerConnection = shape.pingsBilled && shape.pingIntervalSeconds > 0 ? 1 / shape.pingIntervalSeconds : 0;
  const idleHeartbeatsMonth = shape.pingIntervalSeconds > 0 ? month / shape.pingIntervalSeconds : 0;
  const sessionsMonth = month / shape.sessionSeconds;
  const designs: DesignEstimate[] = [];

  // --- hubs ------------------------------------------------------------------
  const H = hubsFor(shape, costs, common);
  const perRoom = hubsFollowing(H, F);
  {
    const pushes = rooms * flushes * perRoom;
    const framesPerConnection = K * flushes;
    const acks = C * shape.acksAt(framesPerConnection);
    const hubCpu = hubCpuPerSecond(shape, costs, common, H);
    const hubActive = Math.min(1, hubCpu / H / 1e6 + ((pushes / H) * costs.rpcLatencyMs) / 1000);
    const upgrades = C / shape.sessionSeconds;
    const incoming = socketPublishes + acks + C * pingsPerConnection;
    const doRequests = (upgrades + httpPublishes + socketPublishes + pushes + incoming / p.doIncomingMessagesPerRequest) * month;
    const workerRequests = (upgrades + httpPublishes) * month;
    const gbSeconds = (rooms * roomActive(perRoom, 0) + H * hubActive) * p.doBilledMemoryGb * month;
    const b = bill(p, { workerRequests, workerCpuMs: workerRequests * costs.workerCpuMsPerRequest, doRequests, gbSeconds, rows: roomsRows, pushes: pushes * month });
    const roomCpu = roomFlushCpu(perRoom) / 1e6;
    const connectionsPerHub = C / H;
    const hubRequests = pushes / H + (upgrades + incoming / p.doIncomingMessagesPerRequest) / H;
    const limits: LimitCheck[] = [
      { name: "connections per hub (MAX_CONNECTIONS_PER_HUB)", value: connectionsPerHub, limit: shape.maxConnectionsPerHub, ok: connectionsPerHub <= shape.maxConnectionsPerHub * 0.8 },
      { name: "hubs (MULTIPLEX_HUBS bound)", value: H, limit: MUX_LIMITS.hubsMax, ok: H <= MUX_LIMITS.hubsMax },
      { name: "room subrequests per flush (one push per hub)", value: perRoom, limit: MUX_LIMITS.subrequestsPerInvocation, ok: perRoom <= MUX_LIMITS.subrequestsPerInvocation },
      { name: "hub requests/s (pushes, upgrades, messages 20:1)", value: hubRequests, limit: MUX_LIMITS.requestsPerSecondPerObject, ok: hubRequests <= MUX_LIMITS.requestsPerSecondPerObject },
      { name: "hub CPU (1 = saturated)", value: hubCpu / H / 1e6, limit: 1, ok: hubCpu / H / 1e6 < 0.99 },
      { name: "room CPU (1 = saturated, flushes coalesce)", value: roomCpu, limit: 1, ok: roomCpu < 0.99 },
    ];
    designs.push({
      design: "hubs",
      socketObjects: H,
      clientSockets: C,
      pushesPerSecond: pushes,
      pushesPerFlush: perRoom,
      cpuPerDeliveryUs: sendCpuPerDelivery + (rooms * flushes * (costs.flushUs + perRoom * (costs.pushIssueUs + costs.pushReceiveUs)) + acks * costs.ackUs) / deliveries,
      addedLatencyMs: costs.rpcLatencyMs + costs.pushReceiveUs / 1000,
      idleHibernates: true,
      busiestObjectCpuShare: Math.max(hubCpu / H / 1e6, roomCpu),
      busiestObject: hubCpu / H / 1e6 >= roomCpu ? "a hub" : "a room",
      limits,
      monthly: b.lines,
      monthlyUsd: b.total,
      usdPerMillionDelivered: deliveries > 0 ? b.total / ((deliveries * month) / 1e6) : 0,
      idleConnectionMonthUsd: idleMonthUsd(p, sessionsMonth, sessionsMonth, shape.pingsBilled ? idleHeartbeatsMonth : 0, sessionsMonth * costs.workerCpuMsPerRequest),
      lostObjectDrops: connectionsPerHub,
      notes: [`${H} hubs of ${Math.round(connectionsPerHub)} connections; a room's flush reaches ${perRoom.toFixed(1)} of them (its ${F} followers placed at random)`],
    });
  }

  // --- an object per connection ---------------------------------------------
  {
    const pushes = rooms * flushes * F;
    const framesPerConnection = K * flushes;
    const acks = C * shape.acksAt(framesPerConnection);
    const perObjectCpu = ((pushes / C) * (costs.pushReceiveUs + costs.sendUs) + shape.acksAt(framesPerConnection) * costs.ackUs) / 1e6;
    const objectActive = Math.min(1, perObjectCpu + ((pushes / C) * costs.rpcLatencyMs) / 1000);
    const upgrades = C / shape.sessionSeconds;
    const incoming = socketPublishes + acks + C * pingsPerConnection;
    const doRequests = (upgrades + httpPublishes + socketPublishes + pushes + incoming / p.doIncomingMessagesPerRequest) * month;
    const workerRequests = (upgrades + httpPublishes) * month;
    const gbSeconds = (rooms * roomActive(F, 0) + C * objectActive) * p.doBilledMemoryGb * month;
    const b = bill(p, { workerRequests, workerCpuMs: workerRequests * costs.workerCpuMsPerRequest, doRequests, gbSeconds, rows: roomsRows, pushes: pushes * month });
    const roomCpu = roomFlushCpu(F) / 1e6;
    // Pushes are calls the room makes, not requests it receives: its requests are its publishes.
    const roomRequests = r;
    designs.push({
      design: "object per connection",
      socketObjects: C,
      clientSockets: C,
      pushesPerSecond: pushes,
      pushesPerFlush: F,
      cpuPerDeliveryUs: sendCpuPerDelivery + (rooms * flushes * (costs.flushUs + F * (costs.pushIssueUs + costs.pushReceiveUs)) + acks * costs.ackUs) / deliveries,
      addedLatencyMs: costs.rpcLatencyMs + costs.pushReceiveUs / 1000 + (F * costs.pushIssueUs) / 2000,
      idleHibernates: true,
      busiestObjectCpuShare: Math.max(roomCpu, perObjectCpu),
      busiestObject: roomCpu >= perObjectCpu ? "a room (it issues a push per follower)" : "a connection's object",
      limits: [
        { name: "room subrequests per flush (one push per follower)", value: F, limit: MUX_LIMITS.subrequestsPerInvocation, ok: F <= MUX_LIMITS.subrequestsPerInvocation },
        { name: "room CPU (1 = saturated, flushes coalesce)", value: roomCpu, limit: 1, ok: roomCpu < 0.99 },
        { name: "room requests/s (publishes)", value: roomRequests, limit: MUX_LIMITS.requestsPerSecondPerObject, ok: roomRequests <= MUX_LIMITS.requestsPerSecondPerObject },
      ],
      monthly: b.lines,
      monthlyUsd: b.total,
      usdPerMillionDelivered: deliveries > 0 ? b.total / ((deliveries * month) / 1e6) : 0,
      idleConnectionMonthUsd: idleMonthUsd(p, sessionsMonth, sessionsMonth, shape.pingsBilled ? idleHeartbeatsMonth : 0, sessionsMonth * costs.workerCpuMsPerRequest),
      lostObjectDrops: 1,
      notes: [`a room's flush is ${F} pushes, ${(F * costs.pushIssueUs / 1000).toFixed(1)} ms of the room's CPU: a room saturates at ${Math.floor(1e6 / (costs.flushUs + F * costs.pushIssueUs))} flushes/s`],
    });
  }

  // --- the Worker holds the client's socket, with an internal socket per room --
  {
    const internal = C * K;
    const framesPerConnection = K * flushes;
    // The client acks the Worker; the Worker acks each room for its own socket's window.
    const roomAcks = internal * shape.acksAt(flushes);
    const upgrades = C / shape.sessionSeconds;
    const internalUpgrades = internal / shape.sessionSeconds;
    const incoming = socketPublishes + roomAcks;
    const relayCpuMs = (frameSends * costs.relayUs) / 1000;
    // The runtime answers a room's heartbeats; the client's heartbeats reach the Worker, which answers them itself.
    const heartbeatCpuMs = (C * (shape.pingIntervalSeconds > 0 ? 1 / shape.pingIntervalSeconds : 0) * costs.relayUs) / 1000;
    const workerCpuMs = ((upgrades + httpPublishes) * costs.workerCpuMsPerRequest + relayCpuMs + heartbeatCpuMs) * month;
    const doRequests = (internalUpgrades + httpPublishes + socketPublishes + incoming / p.doIncomingMessagesPerRequest) * month;
    const workerRequests = (upgrades + httpPublishes) * month;
    const gbSeconds = rooms * roomActive(0, F) * p.doBilledMemoryGb * month;
    const b = bill(p, { workerRequests, workerCpuMs, doRequests, gbSeconds, rows: roomsRows, pushes: 0 });
    const cpuPerSecondOfConnection = (framesPerConnection * costs.relayUs) / 1e6;
    const cpuLimitHours = cpuPerSecondOfConnection > 0 ? MUX_LIMITS.workerCpuSecondsDefault / cpuPerSecondOfConnection / 3600 : Number.POSITIVE_INFINITY;
    const roomCpu = roomActive(0, F);
    designs.push({
      design: "Worker-held socket",
      socketObjects: rooms,
      clientSockets: C,
      pushesPerSecond: 0,
      pushesPerFlush: 0,
      cpuPerDeliveryUs: sendCpuPerDelivery + (frameSends * costs.relayUs + rooms * flushes * costs.flushUs + roomAcks * costs.ackUs) / deliveries,
      addedLatencyMs: costs.rpcLatencyMs + costs.relayUs / 1000,
      idleHibernates: false,
      busiestObjectCpuShare: roomCpu,
      busiestObject: "a room",
      limits: [
        { name: "internal sockets per invocation (simultaneous open connections)", value: K, limit: MUX_LIMITS.openConnectionsPerInvocation, ok: K <= MUX_LIMITS.openConnectionsPerInvocation },
        { name: "hours until a connection's invocation spends 30 s of CPU", value: cpuLimitHours, limit: shape.sessionSeconds / 3600, ok: cpuLimitHours * 3600 >= shape.sessionSeconds },
        { name: "room sockets (internal ones)", value: F, limit: MUX_LIMITS.socketsPerObject, ok: F <= MUX_LIMITS.socketsPerObject },
      ],
      monthly: b.lines,
      monthlyUsd: b.total,
      usdPerMillionDelivered: deliveries > 0 ? b.total / ((deliveries * month) / 1e6) : 0,
      // Workers Paid bills a Worker's CPU, not its wall time: an open, idle invocation costs its heartbeats' CPU, and K internal upgrades a session.
      idleConnectionMonthUsd: idleMonthUsd(p, sessionsMonth, sessionsMonth * K, 0, sessionsMonth * costs.workerCpuMsPerRequest + (idleHeartbeatsMonth * costs.relayUs) / 1000),
      lostObjectDrops: 1,
      notes: [
        "the invocation stays alive while the socket is open: it cannot hibernate, and a deploy or an isolate's eviction drops every connection it holds",
        `each connection opens ${K} internal sockets; past ${MUX_LIMITS.openConnectionsPerInvocation} open at once an invocation waits, so K > ${MUX_LIMITS.openConnectionsPerInvocation} does not work as one connection`,
      ],
    });
  }

  // --- single-room sockets -----------------------------------------------------
  {
    const sockets = C * K;
    const acks = sockets * shape.acksAt(flushes);
    const upgrades = sockets / shape.sessionSeconds;
    const incoming = socketPublishes + acks + sockets * pingsPerConnection;
    const doRequests = (upgrades + httpPublishes + incoming / p.doIncomingMessagesPerRequest) * month;
    const workerRequests = (upgrades + httpPublishes) * month;
    const roomCpu = (roomFlushCpu(0) + flushes * F * costs.sendUs + (acks / rooms) * costs.ackUs) / 1e6;
    const gbSeconds = rooms * Math.min(1, roomCpu) * p.doBilledMemoryGb * month;
    const b = bill(p, { workerRequests, workerCpuMs: workerRequests * costs.workerCpuMsPerRequest, doRequests, gbSeconds, rows: roomsRows, pushes: 0 });
    designs.push({
      design: "single-room sockets",
      socketObjects: rooms,
      clientSockets: sockets,
      pushesPerSecond: 0,
      pushesPerFlush: 0,
      cpuPerDeliveryUs: sendCpuPerDelivery + (rooms * flushes * costs.flushUs + acks * costs.ackUs) / deliveries,
      addedLatencyMs: 0,
      idleHibernates: true,
      busiestObjectCpuShare: roomCpu,
      busiestObject: "a room",
      limits: [{ name: "sockets per room", value: F, limit: MUX_LIMITS.socketsPerObject, ok: F <= MUX_LIMITS.socketsPerObject }],
      monthly: b.lines,
      monthlyUsd: b.total,
      usdPerMillionDelivered: deliveries > 0 ? b.total / ((deliveries * month) / 1e6) : 0,
      idleConnectionMonthUsd: idleMonthUsd(p, sessionsMonth * K, sessionsMonth * K, shape.pingsBilled ? idleHeartbeatsMonth * K : 0, sessionsMonth * K * costs.workerCpuMsPerRequest),
      lostObjectDrops: F,
      notes: [`${sockets.toLocaleString("en-US")} sockets: each client holds ${K}, each with its own heartbeat and upgrade`],
    });
  }

  return {
    shape,
    rooms,
    hubs: H,
    hubsPerRoom: perRoom,
    connectionsPerHub: C / H,
    flushesPerRoomPerSecond: flushes,
    deliveriesPerSecond: deliveries,
    designs: designs.map((d) => ({ ...d, notes: perFlush > 1.01 ? [...d.notes, `${perFlush.toFixed(1)} messages per flush`] : d.notes })),
  };
}

/**
 * The messages per second per room at which hubs and single-room sockets cost the same a month (everything else
 * as in `shape`): below it hubs cost less (fewer sockets, heartbeats and upgrades), above it the pushes cost more
 * than the sockets' own frames, which the platform does not bill. Undefined when one is cheaper at every rate
 * between 0.001 and 1,000.
 */
export function breakEvenRoomRate(shape: MuxShape, costs: MuxCosts, p: Pricing): number | undefined {
  const gap = (rate: number): number => {
    const e = multiplexedFanout({ ...shape, roomRate: rate }, costs, p);
    const cost = (name: DesignName) => e.designs.find((d) => d.design === name)?.monthlyUsd ?? 0;
    return cost("hubs") - cost("single-room sockets");
  };
  let lo = 0.001;
  let hi = 1000;
  if (gap(lo) >= 0 || gap(hi) <= 0) return undefined;
  for (let i = 0; i < 60; i++) {
    const mid = Math.sqrt(lo * hi);
    if (gap(mid) < 0) lo = mid;
    else hi = mid;
  }
  return Math.sqrt(lo * hi);
}
