import { fmt } from "./format";
import type { ShardCosts, ShardedFanout } from "./sharded";

const usd = (n: number) => `$${n >= 100 ? Math.round(n).toLocaleString("en-US") : n >= 1 ? n.toFixed(2) : n.toPrecision(2)}`;

/** One sharded room in full: topology, fan-out time, limits, bill. */
export function shardedSection(r: ShardedFanout, costs: ShardCosts, sources: Record<keyof ShardCosts, string>): string {
  const out: string[] = [];
  const s = r.shape;
  out.push(`Sharded room on Cloudflare: ${fmt(s.subscribers)} subscribers, ${s.messagesPerSecond} msg/s into the room`);
  out.push(`  per-step costs: send ${fmt(costs.sendUs)} µs [${sources.sendUs}]`);
  out.push(`                  + ${fmt(costs.leafExtraPerDeliveryUs)} µs per delivery on a leaf [${sources.leafExtraPerDeliveryUs}]`);
  out.push(`                  push issue ${fmt(costs.pushIssueUs)} µs, receive ${fmt(costs.pushReceiveUs)} µs [${sources.pushIssueUs}]`);
  out.push(`                  flush ${fmt(costs.flushUs)} µs [${sources.flushUs}]; ack ${fmt(costs.ackUs)} µs [${sources.ackUs}]`);
  out.push(`                  RPC ${fmt(costs.rpcLatencyMs)} ms one way [${sources.rpcLatencyMs}], ${fmt(costs.rpcConcurrency)} in flight [${sources.rpcConcurrency}]`);
  out.push(`  topology: root ${fmt(r.rootSockets)} sockets + ${fmt(r.leaves)} leaves × ${fmt(r.socketsPerLeaf)} (ROOM_SHARD_SOCKETS=${fmt(r.shardSockets)})`);
  out.push(`  flushes ${fmt(r.flushesPerSecond)}/s, ${r.messagesPerFlush.toFixed(2)} messages each; publish to every socket ~${fmt(r.fanoutMs)} ms`);
  out.push(`  CPU: root ${(r.rootCpuShare * 100).toFixed(1)}% of its thread, each leaf ${(r.leafCpuShare * 100).toFixed(1)}%`);
  out.push("  limits:");
  for (const l of r.limits) out.push(`    ${l.ok ? "ok  " : "OVER"} ${l.name.padEnd(48)} ${fmt(l.value)} of ${fmt(l.limit)}`);
  out.push("  monthly:");
  for (const l of r.monthly) out.push(`    ${l.item.padEnd(92)} ${fmt(l.quantity).padStart(16)}  ${usd(l.usd).padStart(10)}`);
  out.push(`    total ${usd(r.monthlyUsd)}/month (the tree's pushes and leaf duration: ${usd(r.treeUsd)}), ${usd(r.usdPerMillionDeliveries)} per million deliveries`);
  for (const n of r.notes) out.push(`  note: ${n}`);
  return out.join("\n");
}

/** Several rooms in one table (the standard 100k / 1M × 1 / 10 msg/s grid). */
export function shardedGrid(rows: readonly ShardedFanout[]): string {
  const out = [
    "Sharded rooms on Cloudflare (model from per-step costs; see the inputs above):",
    "  subscribers  msg/s  on root  per leaf  leaves  msgs/flush  to all (ms)  root CPU  leaf CPU  $/month  of which tree  $/M deliveries  limits",
  ];
  for (const r of rows) {
    const over = r.limits.filter((l) => !l.ok).map((l) => l.name.replace(/ \(.*\)$/, ""));
    out.push(
      `  ${fmt(r.shape.subscribers).padStart(11)}  ${String(r.shape.messagesPerSecond).padStart(5)}  ${fmt(r.rootSockets).padStart(7)}  ${fmt(r.socketsPerLeaf).padStart(8)}  ${fmt(r.leaves).padStart(6)}  ${r.messagesPerFlush.toFixed(2).padStart(10)}  ${fmt(r.fanoutMs).padStart(11)}  ${`${(r.rootCpuShare * 100).toFixed(0)}%`.padStart(8)}  ${`${(r.leafCpuShare * 100).toFixed(0)}%`.padStart(8)}  ${usd(r.monthlyUsd).padStart(7)}  ${usd(r.treeUsd).padStart(13)}  ${usd(r.usdPerMillionDeliveries).padStart(14)}  ${r.needsThirdLevel ? "third level needed; " : ""}${over.length ? `at: ${over.join(", ")}` : "ok"}`,
    );
  }
  return out.join("\n");
}
