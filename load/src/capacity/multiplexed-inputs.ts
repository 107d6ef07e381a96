import { median } from "../stats/percentile";
import { readResult, type RoundsColumn } from "../result";
import { hubsFollowing, type MuxCosts } from "./multiplexed";

/**
 * Per-step costs of the multiplexed designs when no multiplex bench result is given.
 * - send: 26 µs, CPU per delivery of one object at one message per frame (docs/benchmarks.md, section 8).
 * - flush: 300 µs, the capacity tool's per-publish assumption.
 * - push: 380 µs for issue + receive together, one Durable Object calling 100 others by RPC locally
 *   (~38 ms CPU, docs/sharded-rooms.md), split evenly between the room and the receiver (an assumption).
 * - ack: 18 µs (load/src/capacity/inputs.ts).
 * - relay: a Worker's receive of a frame and its send to the client, taken as one more send (an assumption: no
 *   prototype of the Worker-held design was measured).
 * - RPC latency 1 ms one way (an assumption: objects near each other), Worker CPU 1 ms per request.
 */
export const DEFAULT_MUX_COSTS: MuxCosts = {
  sendUs: 26,
  flushUs: 300,
  pushIssueUs: 190,
  pushReceiveUs: 190,
  ackUs: 18,
  relayUs: 26,
  rpcLatencyMs: 1,
  workerCpuMsPerRequest: 1,
};

export const DEFAULT_MUX_SOURCES: Record<keyof MuxCosts, string> = {
  sendUs: "default: 15,000 sockets in one object, one message per frame (docs/benchmarks.md, section 8)",
  flushUs: "default: the capacity tool's per-publish assumption",
  pushIssueUs: "default: half of ~380 µs per DO-to-DO RPC measured locally (docs/sharded-rooms.md)",
  pushReceiveUs: "default: half of ~380 µs per DO-to-DO RPC measured locally (docs/sharded-rooms.md)",
  ackUs: "default: measured once (load/README.md)",
  relayUs: "assumption: a relayed frame costs the Worker what one more send costs (not measured)",
  rpcLatencyMs: "assumption: objects near each other",
  workerCpuMsPerRequest: "assumption",
};

function medianOf(column: RoundsColumn | undefined, key: string): number | undefined {
  const values = (column?.rounds ?? []).map((r) => r.summary[key]).filter((v): v is number => typeof v === "number");
  return values.length ? median(values) : undefined;
}

/** The --server-var MULTIPLEX_HUBS of a column's name ("multiplexed, 4 hubs"), 16 by default. */
function hubsOf(name: string): number {
  const n = /([\d,]+) hubs/.exec(name)?.[1];
  return n === undefined ? 16 : Number(n.replace(/,/g, ""));
}

/**
 * Costs from a multiplex benchmark result (load/bench/multiplex.ts) where it measured them: the send from the single-room column (its
 * CPU per delivery, less the flush's share), the push from what the default hubs' column cost beyond it (the
 * extra CPU per delivery × followers ÷ hubs per room flush), split evenly between issue and receive.
 */
export function muxCostsFrom(file: string | undefined): { costs: MuxCosts; sources: Record<keyof MuxCosts, string> } {
  const costs = { ...DEFAULT_MUX_COSTS };
  const sources = { ...DEFAULT_MUX_SOURCES };
  if (file === undefined) return { costs, sources };
  const result = readResult(file, "multiplex");
  const fanout = result.tables.find((t) => t.name === "fanout");
  if (!fanout) return { costs, sources };
  const followers = Number(fanout.common[fanout.common.indexOf("--sockets") + 1]);
  const single = medianOf(fanout.columns.find((c) => c.name.startsWith("single")), "serverCpuPerDeliveryUs");
  const hubsColumn = fanout.columns.find((c) => c.name === "multiplexed, 16 hubs");
  const mux = medianOf(hubsColumn, "serverCpuPerDeliveryUs");
  if (single !== undefined && single > 0) {
    costs.sendUs = Math.max(1, single - costs.flushUs / followers);
    costs.relayUs = costs.sendUs;
    sources.sendUs = `${file}: single-room sockets' CPU per delivery (median), less the flush's share`;
  }
  if (single !== undefined && mux !== undefined && hubsColumn && mux > single && followers > 0) {
    const push = ((mux - single) * followers) / hubsFollowing(hubsOf(hubsColumn.name), followers);
    costs.pushIssueUs = push / 2;
    costs.pushReceiveUs = push / 2;
    sources.pushIssueUs = sources.pushReceiveUs = `${file}: half of what 16 hubs cost beyond single-room sockets per delivery × followers ÷ hubs per room flush`;
  }
  return { costs, sources };
}
