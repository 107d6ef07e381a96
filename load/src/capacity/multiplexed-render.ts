import { fmt, usd, usdPerMillion } from "./format";
import type { MuxCosts, MuxEstimate } from "./multiplexed";

/** The multiplexed workload in every design: topology, the designs side by side, each one's limits and bill. */
export function multiplexedSection(e: MuxEstimate, costs: MuxCosts, sources: Record<keyof MuxCosts, string>): string {
  const s = e.shape;
  const out: string[] = [];
  out.push(
    `Multiplexed connections on Cloudflare: ${fmt(s.connections)} connections × ${s.roomsPerConnection} rooms each = ${fmt(s.connections * s.roomsPerConnection)} subscriptions, in ${fmt(e.rooms)} rooms of ${fmt(s.followersPerRoom)} followers, ${s.roomRate} msg/s per room`,
  );
  out.push(`  = ${fmt(e.deliveriesPerSecond)} deliveries/s; ${fmt(e.flushesPerRoomPerSecond)} flushes/s per room; publishes via ${s.publishVia}`);
  out.push(`  hubs: ${fmt(e.hubs)} (MULTIPLEX_HUBS${s.hubs > 0 ? ", given" : ", the fewest that hold the connections at 80% and keep a hub's thread within budget"}), ${fmt(e.connectionsPerHub)} connections each; a room's flush reaches ${e.hubsPerRoom.toFixed(1)} hubs`);
  out.push("  per-step costs:");
  for (const key of Object.keys(costs) as Array<keyof MuxCosts>) out.push(`    ${key.padEnd(22)} ${fmt(costs[key]).padStart(8)}   [${sources[key]}]`);
  out.push("");
  const head = ["", ...e.designs.map((d) => d.design)];
  const rows: Array<[string, (d: MuxEstimate["designs"][number]) => string]> = [
    ["client sockets", (d) => fmt(d.clientSockets)],
    ["objects holding them", (d) => fmt(d.socketObjects)],
    ["pushes per room flush", (d) => fmt(d.pushesPerFlush)],
    ["pushes/s", (d) => fmt(d.pushesPerSecond)],
    ["CPU per delivery, all objects (µs)", (d) => fmt(d.cpuPerDeliveryUs)],
    ["latency added (ms)", (d) => fmt(d.addedLatencyMs)],
    ["busiest object's thread", (d) => `${(d.busiestObjectCpuShare * 100).toFixed(0)}% (${d.busiestObject.split(" (")[0]})`],
    ["idle connection hibernates", (d) => (d.idleHibernates ? "yes" : "no")],
    ["a lost object drops (connections)", (d) => fmt(d.lostObjectDrops)],
    ["limits", (d) => (d.limits.every((l) => l.ok) ? "ok" : `OVER (${d.limits.filter((l) => !l.ok).length}, below)`)],
    ["USD/month", (d) => usd(d.monthlyUsd)],
    ["USD per million delivered", (d) => usdPerMillion(d.usdPerMillionDelivered)],
    ["USD per idle connection-month", (d) => usdPerMillion(d.idleConnectionMonthUsd)],
  ];
  const width = 24;
  out.push(head.map((h, i) => (i === 0 ? h.padEnd(36) : h.padStart(width))).join("  "));
  for (const [label, cell] of rows) out.push([label.padEnd(36), ...e.designs.map((d) => cell(d).padStart(width))].join("  "));
  for (const d of e.designs) {
    out.push("");
    out.push(`  ${d.design}: ${usd(d.monthlyUsd)}/month`);
    for (const l of d.monthly) out.push(`    ${l.item.padEnd(68)} ${fmt(l.quantity).padStart(18)}  ${usd(l.usd).padStart(12)}`);
    for (const l of d.limits) out.push(`    ${l.ok ? "ok  " : "OVER"} ${l.name.padEnd(64)} ${fmt(l.value)} of ${fmt(l.limit)}`);
    for (const n of d.notes) out.push(`    note: ${n}`);
  }
  out.push("");
  out.push("  (an idle connection-month: its upgrades (one per session) and billed heartbeats at the marginal prices, past the plan's allowances; no messages)");
  return out.join("\n");
}
