import { readResult } from "../result";
import type { ShardCosts } from "./sharded";

/**
 * Per-step costs of a sharded room when no sharded bench result is given.
 * - send: 26 µs, CPU per delivery of 15,000 sockets in one object at one message
 *   per frame (docs/benchmarks.md, section 8; workerd's ws.send is 22-30 µs on
 *   this machine kind, and the platform's own figure is not published).
 * - per delivery on a leaf: 2.8 µs more, what the same room sharded at 2,000
 *   cost beyond one object, less its pushes (the same run).
 * - push: 380 µs for issue + receive together, one Durable Object calling 100
 *   others by RPC locally (~38 ms CPU, docs/sharded-rooms.md), split evenly
 *   between the root and the leaf (an assumption: both run in one process here).
 * - per further message in a frame: 0.2 µs (200 payloads in one frame, docs/benchmarks.md).
 * - ack: 18 µs (load/src/capacity/inputs.ts).
 * - RPC latency 1 ms one way (an assumption: leaves are placed near their root).
 * - 6 pushes waiting at once (the outgoing-connection limit per request, if it applies to RPC).
 * - 2 KB of JS state per socket (an assumption; the runtime holds the socket itself).
 */
export const DEFAULT_SHARD_COSTS: ShardCosts = {
  sendUs: 26,
  leafExtraPerDeliveryUs: 2.8,
  pushIssueUs: 190,
  pushReceiveUs: 190,
  flushUs: 300,
  payloadInFrameUs: 0.2,
  ackUs: 18,
  rpcLatencyMs: 1,
  rpcConcurrency: 6,
  stateBytesPerSocket: 2048,
  ringBytes: 8 * 1024 * 1024,
};

export const DEFAULT_SHARD_SOURCES: Record<keyof ShardCosts, string> = {
  sendUs: "default: 15,000 sockets in one object, one message per frame, 2026-12-01 (docs/benchmarks.md, section 8)",
  leafExtraPerDeliveryUs: "default: 15,000 sockets sharded at 2,000 against one object, 2026-12-01 (docs/benchmarks.md, section 8)",
  pushIssueUs: "default: half of ~380 µs per DO-to-DO RPC measured locally (docs/sharded-rooms.md)",
  pushReceiveUs: "default: half of ~380 µs per DO-to-DO RPC measured locally (docs/sharded-rooms.md)",
  flushUs: "default: the capacity tool's per-publish assumption",
  payloadInFrameUs: "default: 0.1-0.2 µs per payload in a 200-payload frame (docs/benchmarks.md)",
  ackUs: "default: measured once (load/README.md)",
  rpcLatencyMs: "assumption: leaves near their root",
  rpcConcurrency: "assumption: the 6 simultaneous outgoing connections per request apply to RPC",
  stateBytesPerSocket: "assumption",
  ringBytes: "RING_MAX_BYTES (durable-objects/leaf/follower.ts: the live part and the backfill together)",
};

/** Costs from a sharded benchmark result (load/bench/sharded.ts) where it measured them, defaults otherwise. */
export function shardCostsFrom(file: string | undefined): { costs: ShardCosts; sources: Record<keyof ShardCosts, string> } {
  const costs = { ...DEFAULT_SHARD_COSTS };
  const sources = { ...DEFAULT_SHARD_SOURCES };
  if (file === undefined) return { costs, sources };
  const result = readResult(file, "sharded");
  const send = result.steps?.sendPerDeliveryUs;
  if (send !== undefined && send > 0) {
    costs.sendUs = send;
    sources.sendUs = `${file}: CPU per delivery, one object, one message per frame`;
  }
  // The pushes are too few in a local run to stand out from the leaves' per-delivery work: the
  // bench pays them at the RPC figure and measures what remains per delivery on a leaf.
  const extra = result.steps?.leafExtraPerDeliveryUs;
  if (extra !== undefined && extra >= 0) {
    costs.leafExtraPerDeliveryUs = extra;
    sources.leafExtraPerDeliveryUs = `${file}: the tree's extra CPU less its pushes, per delivery on a leaf`;
  }
  return { costs, sources };
}
