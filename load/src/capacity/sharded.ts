/**
 * A sharded room on Cloudflare (docs/sharded-rooms.md): a root object that
 * assigns seqs and pushes each flush to K leaf objects by RPC, each leaf
 * sending to its sockets. Built only from per-step costs (measured locally by
 * load/bench/sharded.ts, or the platform figures cited in the docs) and the
 * platform's published limits; every figure says where it came from.
 *
 * The model, per flush (one frame per socket; messages that arrive while a
 * flush is being pushed wait for the next one, so a busy root or leaf carries
 * more messages per flush instead of falling behind):
 * - root: publish work, then K push issues (CPU, serial on its one thread),
 *   the pushes travel `rpcConcurrency` at a time, then its own sockets' sends;
 * - leaf: receive a push, then one send per socket.
 * Publish-to-every-socket time = root issue of all pushes (or their waves) +
 * one-way RPC latency + leaf receive + sends of the fullest leaf.
 */
import { overage, SECONDS_PER_MONTH, type Pricing } from "./pricing";

/** Platform bounds that decide K and sockets per leaf. */
export const SHARD_LIMITS = {
  /** Hibernatable WebSockets per object (Durable Objects WebSocket API). */
  socketsPerObject: 32_768,
  /** ROOM_SHARD_SOCKETS upper bound in worker/settings.ts (the platform's bound with a margin). */
  shardSocketsMax: 32_000,
  /** ROOM_MAX_LEAVES upper bound in worker/settings.ts. */
  leavesMax: 1000,
  /** Subrequests per invocation on Workers Paid (10,000 on the current limits page; 1,000 on earlier ones). */
  subrequestsPerInvocation: 10_000,
  /** Soft limit of requests per second one object handles. */
  requestsPerSecondPerObject: 1000,
  /** Memory of one object's isolate, bytes. */
  memoryPerObjectBytes: 128 * 1024 * 1024,
} as const;

export interface ShardCosts {
  /** CPU of one socket send (one frame), µs. */
  sendUs: number;
  /** CPU a delivery costs on a leaf beyond `sendUs` (its sockets' frames and acks through the leaf), µs. */
  leafExtraPerDeliveryUs: number;
  /** Root CPU to issue one push RPC, µs. */
  pushIssueUs: number;
  /** Leaf CPU to receive one push (besides its sends), µs. */
  pushReceiveUs: number;
  /** Root CPU per flush besides pushes and sends (seq, history row), µs. */
  flushUs: number;
  /** Extra CPU per further message carried in the same frame, µs per socket. */
  payloadInFrameUs: number;
  /** CPU of one incoming ack, µs. */
  ackUs: number;
  /** One-way latency of a push from the root to a leaf near it, ms. */
  rpcLatencyMs: number;
  /** Pushes the root has waiting for an answer at once (6 if the outgoing-connection limit applies to RPC). */
  rpcConcurrency: number;
  /** JS state per socket in the object (attachment, cursor), bytes. */
  stateBytesPerSocket: number;
  /** Bytes a leaf keeps in its ring of recent messages at most. */
  ringBytes: number;
}

export interface ShardShape {
  subscribers: number;
  /** Messages per second into the room. */
  messagesPerSecond: number;
  /** Sockets per object (ROOM_SHARD_SOCKETS); 0 = choose from `leafBudget`. */
  shardSockets: number;
  /**
   * Sockets on the root itself. Undefined: min(subscribers, shardSockets), as a room that grew
   * holds; 0 is a room whose sockets all came back through placements (after a reconnect storm).
   */
  rootSockets?: number;
  /** Share of a leaf's thread its sends and acks may take when choosing sockets per leaf (0..1). */
  leafBudget: number;
  /** Acks per socket per second the clients send for `messagesPerSecond` (SDK: frames ÷ (1 + frames × delay)). */
  acksPerSocketAt: (framesPerSecond: number) => number;
  /** Seconds a connection lives (one upgrade per session). */
  sessionSeconds: number;
  /** Text heartbeats per socket per second that are billed. */
  pingsPerSocketPerSecond: number;
}

export interface LimitCheck {
  name: string;
  value: number;
  limit: number;
  ok: boolean;
}

export interface ShardedFanout {
  shape: ShardShape;
  shardSockets: number;
  leaves: number;
  rootSockets: number;
  socketsPerLeaf: number;
  /** Flushes per second the root carries, and messages per flush (> 1 when it coalesces). */
  flushesPerSecond: number;
  messagesPerFlush: number;
  /** Publish to the last socket, ms (with the root and leaves not queueing). */
  fanoutMs: number;
  rootCpuShare: number;
  leafCpuShare: number;
  limits: LimitCheck[];
  /** The tree needs a third level (a leaf of leaves) to meet these limits. */
  needsThirdLevel: boolean;
  monthly: { item: string; quantity: number; usd: number }[];
  monthlyUsd: number;
  /** What the tree itself adds to the bill: pushes (requests to leaves) and the leaves' duration. */
  treeUsd: number;
  usdPerMillionDeliveries: number;
  notes: string[];
}

/** Sockets per leaf such that its sends and acks take `budget` of its thread at this rate. */
export function socketsPerLeafFor(messagesPerSecond: number, costs: ShardCosts, shape: ShardShape): number {
  const perSocketUs = messagesPerSecond * costs.sendUs + shape.acksPerSocketAt(messagesPerSecond) * costs.ackUs;
  const fit = Math.floor((shape.leafBudget * 1e6) / Math.max(1e-9, perSocketUs));
  return Math.max(1, Math.min(SHARD_LIMITS.shardSocketsMax, fit));
}

/** The time a root takes per flush: publish work, issuing K pushes, and its own sends. */
function rootFlushUs(leaves: number, rootSockets: number, messagesPerFlush: number, c: ShardCosts): number {
  return c.flushUs + leaves * c.pushIssueUs + rootSockets * (c.sendUs + (messagesPerFlush - 1) * c.payloadInFrameUs);
}

export function shardedFanout(shape: ShardShape, c: ShardCosts, pricing: Pricing): ShardedFanout {
  const S = shape.subscribers;
  const R = shape.messagesPerSecond;
  const notes: string[] = [];
  const P = shape.shardSockets > 0 ? shape.shardSockets : socketsPerLeafFor(R, c, shape);
  if (shape.shardSockets === 0) notes.push(`sockets per leaf chosen so a leaf's sends and acks take ${Math.round(shape.leafBudget * 100)}% of its thread at ${R} msg/s`);
  // The root keeps its first P sockets; after a reconnect storm it places them all on leaves (fewer for it).
  const rootSockets = Math.min(S, P, shape.rootSockets ?? Number.POSITIVE_INFINITY);
  const leaves = Math.ceil(Math.max(0, S - rootSockets) / P);
  const socketsPerLeaf = leaves > 0 ? Math.ceil((S - rootSockets) / leaves) : 0;

  // Flushes: at most one per message; when a root flush takes longer than the gap between
  // messages, the next flush carries everything that arrived meanwhile.
  const leafSendUs = c.sendUs + c.leafExtraPerDeliveryUs;
  // Acks take their share of each thread first; flushes get what is left.
  let flushes = R;
  for (let i = 0; i < 20; i++) {
    const acks = shape.acksPerSocketAt(flushes) * c.ackUs / 1e6;
    const perFlush = rootFlushUs(leaves, rootSockets, R / Math.max(1e-9, flushes), c) / 1e6 / Math.max(1e-3, 1 - rootSockets * acks);
    const leafPerFlush =
      (c.pushReceiveUs + socketsPerLeaf * (leafSendUs + (R / Math.max(1e-9, flushes) - 1) * c.payloadInFrameUs)) / 1e6 / Math.max(1e-3, 1 - socketsPerLeaf * acks);
    const bound = 1 / Math.max(perFlush, leafPerFlush, 1e-9);
    flushes = Math.min(R, bound);
  }
  const perFlushMessages = R / Math.max(1e-9, flushes);
  const waves = leaves > 0 ? Math.ceil(leaves / Math.max(1, c.rpcConcurrency)) : 0;
  // Pushes go out as the root issues them, at most rpcConcurrency waiting: a wave waits a round trip.
  const issueMs = Math.max((leaves * c.pushIssueUs) / 1000, Math.max(0, waves - 1) * 2 * c.rpcLatencyMs);
  const leafMs = leaves > 0 ? issueMs + c.rpcLatencyMs + (c.pushReceiveUs + socketsPerLeaf * leafSendUs) / 1000 : 0;
  const rootMs = (c.flushUs + leaves * c.pushIssueUs + rootSockets * c.sendUs) / 1000;
  const fanoutMs = Math.max(leafMs, rootMs);

  const rootAcks = shape.acksPerSocketAt(flushes);
  const rootCpuShare = (flushes * rootFlushUs(leaves, rootSockets, perFlushMessages, c) + rootSockets * rootAcks * c.ackUs) / 1e6;
  const leafCpuShare =
    (flushes * (c.pushReceiveUs + socketsPerLeaf * (leafSendUs + (perFlushMessages - 1) * c.payloadInFrameUs)) + socketsPerLeaf * rootAcks * c.ackUs) / 1e6;

  // Requests an object receives per second. The root: publishes, and placements for the sockets
  // that arrive (sessions end and start again), counted one per socket as if no edge isolate ever
  // reused a grant (the worst case; leaves' reports ride on push answers while messages flow).
  // A leaf: pushes, and the upgrades of its sockets.
  const upgradesPerSecond = S / shape.sessionSeconds;
  const placementsPerSecond = leaves > 0 ? upgradesPerSecond * ((S - rootSockets) / S) : 0;
  const rootRequests = R + placementsPerSecond + (rootSockets / Math.max(1, S)) * upgradesPerSecond;
  const leafRequests = flushes + (leaves > 0 ? placementsPerSecond / leaves : 0);
  const memory = (sockets: number, ring: number) => sockets * c.stateBytesPerSocket + ring;
  const limits: LimitCheck[] = [
    { name: "sockets per object", value: Math.max(rootSockets, socketsPerLeaf), limit: SHARD_LIMITS.socketsPerObject, ok: Math.max(rootSockets, socketsPerLeaf) <= SHARD_LIMITS.shardSocketsMax },
    { name: "leaves (ROOM_MAX_LEAVES bound)", value: leaves, limit: SHARD_LIMITS.leavesMax, ok: leaves <= SHARD_LIMITS.leavesMax },
    { name: "root subrequests per flush (one push per leaf)", value: leaves, limit: SHARD_LIMITS.subrequestsPerInvocation, ok: leaves <= SHARD_LIMITS.subrequestsPerInvocation },
    { name: "root requests/s", value: rootRequests, limit: SHARD_LIMITS.requestsPerSecondPerObject, ok: rootRequests <= SHARD_LIMITS.requestsPerSecondPerObject },
    { name: "leaf requests/s (pushes)", value: leafRequests, limit: SHARD_LIMITS.requestsPerSecondPerObject, ok: leafRequests <= SHARD_LIMITS.requestsPerSecondPerObject },
    // At 1 the object is saturated and flushes coalesce (fewer, larger frames): latency grows, nothing is lost.
    { name: "root CPU (1 = saturated, flushes coalesce)", value: rootCpuShare, limit: 1, ok: rootCpuShare < 0.99 },
    { name: "leaf CPU (1 = saturated, flushes coalesce)", value: leafCpuShare, limit: 1, ok: leafCpuShare < 0.99 },
    { name: "leaf memory (socket state + ring), bytes", value: memory(socketsPerLeaf, c.ringBytes), limit: SHARD_LIMITS.memoryPerObjectBytes, ok: memory(socketsPerLeaf, c.ringBytes) <= SHARD_LIMITS.memoryPerObjectBytes },
  ];
  // CPU at 100% is not a failure: flushes coalesce. A third level is needed when the root cannot
  // issue one flush's pushes within a second, or K passes the bounds on leaves and subrequests.
  const issueSeconds = (leaves * c.pushIssueUs) / 1e6;
  const needsThirdLevel = issueSeconds >= 1 || limits.some((l) => !l.ok && (l.name.startsWith("leaves") || l.name.startsWith("root subrequests")));
  if (rootCpuShare > 0.99 && rootSockets > 0 && (flushes * rootSockets * c.sendUs) / 1e6 > 0.5) {
    notes.push(`the root's own ${rootSockets} sockets take most of its thread: a root that holds none (--root-sockets 0, as after a reconnect storm) pushes every message alone`);
  }
  if (perFlushMessages > 1.01) notes.push(`the tree carries ${perFlushMessages.toFixed(1)} messages per flush: it coalesces rather than falls behind, and each socket gets ${flushes.toFixed(1)} frames/s`);
  if (needsThirdLevel) notes.push("past the tree's ceiling: a third level (leaves of leaves) would be needed, or fewer, fuller leaves");

  // The bill of the room for a month.
  const month = SECONDS_PER_MONTH;
  const acksPerSecond = S * rootAcks;
  const pings = S * shape.pingsPerSocketPerSecond;
  const upgrades = upgradesPerSecond;
  const pushes = leaves * flushes;
  const placements = placementsPerSecond;
  const doRequests = (upgrades + placements + R + pushes + (acksPerSecond + pings) / pricing.doIncomingMessagesPerRequest) * month;
  const workerRequests = (upgrades + R) * month;
  // Billed while handling: root and every leaf, each for its busy share (wall ≈ CPU for work in memory,
  // plus the RPC latency each push holds a leaf's request open).
  const leafActive = Math.min(1, leafCpuShare + (flushes * c.rpcLatencyMs) / 1000);
  const rootActive = Math.min(1, rootCpuShare + (flushes * c.rpcLatencyMs) / 1000);
  const gbSeconds = (rootActive + leaves * leafActive) * pricing.doBilledMemoryGb * month;
  const treeUsd = ((pushes * month) / 1e6) * pricing.doRequestsPerMillion + ((leaves * leafActive * pricing.doBilledMemoryGb * month) / 1e6) * pricing.doGbSecondsPerMillion;
  const rows = flushes * month;
  const monthly = [
    { item: "Workers Paid subscription", quantity: 1, usd: pricing.workersPaidMonthly },
    { item: "Worker requests (upgrades, HTTP publishes)", quantity: workerRequests, usd: overage(workerRequests, pricing.workerRequestsIncluded, pricing.workerRequestsPerMillion) },
    { item: "Durable Object requests (upgrades, placements, publishes, pushes; acks and heartbeats 20:1)", quantity: doRequests, usd: overage(doRequests, pricing.doRequestsIncluded, pricing.doRequestsPerMillion) },
    { item: "  of which leaf pushes", quantity: pushes * month, usd: ((pushes * month) / 1e6) * pricing.doRequestsPerMillion },
    { item: "Durable Object duration (root + leaves, active share)", quantity: gbSeconds, usd: overage(gbSeconds, pricing.doGbSecondsIncluded, pricing.doGbSecondsPerMillion) },
    { item: "SQLite rows written (one per flush)", quantity: rows, usd: overage(rows, pricing.sqliteRowsWrittenIncluded, pricing.sqliteRowsWrittenPerMillion) },
  ];
  const monthlyUsd = monthly.filter((l) => !l.item.startsWith("  ")).reduce((sum, l) => sum + l.usd, 0);
  const deliveries = S * R * month;
  return {
    shape,
    shardSockets: P,
    leaves,
    rootSockets,
    socketsPerLeaf,
    flushesPerSecond: flushes,
    messagesPerFlush: perFlushMessages,
    fanoutMs,
    rootCpuShare,
    leafCpuShare,
    limits,
    needsThirdLevel,
    monthly,
    monthlyUsd,
    treeUsd,
    usdPerMillionDeliveries: deliveries > 0 ? monthlyUsd / (deliveries / 1e6) : 0,
    notes,
  };
}
