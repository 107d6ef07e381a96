/**
 * `npm run capacity -- [options]`: how many clients a deployment holds, what
 * runs out first, and what it costs per month on Cloudflare versus a small
 * fixed-price server. Measured inputs come from `npm run load` JSON results.
 */
import { readFileSync } from "node:fs";
import { totalmem } from "node:os";
import { parseArgs } from "node:util";
import { PING_INTERVAL_SECONDS } from "../../client-sdk/src/protocol";
import { DEFAULTS } from "../../durable-objects/config";
import { measuredCosts } from "./capacity/inputs";
import {
  cloudflareMonthlyCost,
  cloudflareRoomCeilings,
  deliveriesPerSecond,
  lowestCeiling,
  selfHostedCeilings,
  vpsEstimate,
  type Ceiling,
  type CostAssumptions,
  type Host,
  type UnitCosts,
  type VpsOffer,
  type Workload,
} from "./capacity/model";
import { CLOUDFLARE_PRICING } from "./capacity/pricing";

const USAGE = `Usage: npm run capacity -- [options]

Workload:
  --connections N        concurrent connections (default 10000)
  --msgs-per-conn R      messages each connection publishes per second (default 0.1)
  --room-size F          sockets per room = fan-out of each message (default 100)
  --payload B            payload bytes (default 100)
  --publish-via socket|http  (default socket)

Measured inputs (defaults: figures in docs/benchmarks.md):
  --from FILE            load JSON result(s) to read measured figures from (repeat for connect + fanout)
  --memory-per-conn B    override server RSS per connection, bytes
  --kernel-per-conn B    override kernel socket memory per connection, bytes (default 3072)
  --cpu-per-delivery US  override server CPU per delivery, µs
  --cpu-per-publish US   override server CPU per publish besides deliveries, µs (default 300, an assumption)

Self-hosted host (default: this machine):
  --host-memory-gb G     memory for the server (default: this machine's total minus 1 GB)
  --host-fds N           descriptor limit (default: this process's soft limit)
  --threads N            server threads (default 1: workerd and Node run a process's rooms on one thread)
  --link-mbit M          network link (default 1000)

Cloudflare assumptions:
  --session-minutes M    average connection life (default 60)
  --rows-per-message N   SQLite rows written per message (default 1: the history ring overwrites one slot)
  --no-ping-billing      do not count the text heartbeat as a billed incoming message
  --ack-kib K            client acks every K KiB received (default: a quarter of the window)

Fixed-price server to compare with:
  --vps-price USD        monthly price (default 6)
  --vps-memory-gb G      (default 1)   --vps-fds N (default 65536)   --vps-link-mbit M (default 1000)
  --vps-transfer-tb T    included outgoing transfer per server and month (default 1)
  --vps-transfer-usd-per-gb P  transfer beyond that, USD per GB (default 0.01)

  --json                 machine-readable output
`;

function ownDescriptorLimit(): number {
  const limits = readFileSync("/proc/self/limits", "utf8");
  return Number(/Max open files\s+(\d+)/.exec(limits)?.[1] ?? 1024);
}

function num(v: string | undefined, name: string, fallback: number): number {
  if (v === undefined) return fallback;
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0) throw new Error(`--${name} must be a non-negative number, got ${v}`);
  return n;
}

function fmt(v: number): string {
  if (!Number.isFinite(v)) return "unbounded";
  if (Math.abs(v) >= 100) return Math.round(v).toLocaleString("en-US");
  return Number(v.toPrecision(3)).toLocaleString("en-US");
}

function ceilingTable(title: string, ceilings: Ceiling[]): string {
  const lowest = lowestCeiling(ceilings);
  const rows = ceilings.map((c) => {
    const mark = c === lowest ? " <- reached first" : "";
    return `  ${c.resource.padEnd(28)} ${`${(c.utilization * 100).toFixed(1)}%`.padStart(9)}   max ${fmt(c.limit).padStart(10)} ${c.limitOf}${mark}\n      ${c.detail}`;
  });
  return `${title}\n  ${"resource".padEnd(28)} ${"used".padStart(9)}\n${rows.join("\n")}\n  lowest ceiling: ${lowest.resource} (${(lowest.utilization * 100).toFixed(1)}% used${lowest.utilization > 1 ? ": DOES NOT FIT" : ""})`;
}

function main(): number {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    strict: true,
    options: {
      connections: { type: "string" },
      "msgs-per-conn": { type: "string" },
      "room-size": { type: "string" },
      payload: { type: "string" },
      "publish-via": { type: "string" },
      from: { type: "string", multiple: true },
      "memory-per-conn": { type: "string" },
      "kernel-per-conn": { type: "string" },
      "cpu-per-delivery": { type: "string" },
      "cpu-per-publish": { type: "string" },
      "host-memory-gb": { type: "string" },
      "host-fds": { type: "string" },
      threads: { type: "string" },
      "link-mbit": { type: "string" },
      "session-minutes": { type: "string" },
      "rows-per-message": { type: "string" },
      "no-ping-billing": { type: "boolean" },
      "ack-kib": { type: "string" },
      "vps-price": { type: "string" },
      "vps-memory-gb": { type: "string" },
      "vps-fds": { type: "string" },
      "vps-link-mbit": { type: "string" },
      "vps-transfer-tb": { type: "string" },
      "vps-transfer-usd-per-gb": { type: "string" },
      json: { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  const via = values["publish-via"] ?? "socket";
  if (via !== "socket" && via !== "http") throw new Error("--publish-via must be socket or http");
  const workload: Workload = {
    connections: num(values.connections, "connections", 10_000),
    messagesPerConnection: num(values["msgs-per-conn"], "msgs-per-conn", 0.1),
    roomSize: Math.max(1, num(values["room-size"], "room-size", 100)),
    payloadBytes: num(values.payload, "payload", 100),
    publishVia: via,
  };
  const files = values.from ?? [];
  const ours = measuredCosts(files, "ours");
  const overrides: Partial<UnitCosts> = {};
  if (values["memory-per-conn"] !== undefined) overrides.memoryPerConnectionBytes = num(values["memory-per-conn"], "memory-per-conn", 0);
  if (values["kernel-per-conn"] !== undefined) overrides.kernelMemoryPerConnectionBytes = num(values["kernel-per-conn"], "kernel-per-conn", 0);
  if (values["cpu-per-delivery"] !== undefined) overrides.cpuPerDeliveryUs = num(values["cpu-per-delivery"], "cpu-per-delivery", 0);
  if (values["cpu-per-publish"] !== undefined) overrides.cpuPerPublishUs = num(values["cpu-per-publish"], "cpu-per-publish", 0);
  for (const key of Object.keys(overrides) as Array<keyof UnitCosts>) ours.sources[key] = "command line";
  const costs: UnitCosts = { ...ours.costs, ...overrides };
  const baseline = measuredCosts(files, "baseline");

  const GB = 1024 ** 3;
  const host: Host = {
    name: "this machine",
    descriptorLimit: num(values["host-fds"], "host-fds", ownDescriptorLimit()),
    memoryBytes: values["host-memory-gb"] !== undefined ? num(values["host-memory-gb"], "host-memory-gb", 0) * GB : Math.max(GB / 2, totalmem() - GB),
    serverThreads: Math.max(1, num(values.threads, "threads", 1)),
    linkBitsPerSecond: num(values["link-mbit"], "link-mbit", 1000) * 1e6,
  };
  const vps: VpsOffer = {
    name: "1 vCPU / 1 GB VPS",
    monthlyUsd: num(values["vps-price"], "vps-price", 6),
    descriptorLimit: num(values["vps-fds"], "vps-fds", 65_536),
    memoryBytes: num(values["vps-memory-gb"], "vps-memory-gb", 1) * GB - 256 * 1024 ** 2,
    serverThreads: 1,
    linkBitsPerSecond: num(values["vps-link-mbit"], "vps-link-mbit", 1000) * 1e6,
    transferBytesPerMonth: num(values["vps-transfer-tb"], "vps-transfer-tb", 1) * 1e12,
    transferOverageUsdPerGb: num(values["vps-transfer-usd-per-gb"], "vps-transfer-usd-per-gb", 0.01),
  };
  const assumptions: CostAssumptions = {
    sessionSeconds: num(values["session-minutes"], "session-minutes", 60) * 60,
    workerCpuMsPerRequest: 1,
    rowsWrittenPerMessage: num(values["rows-per-message"], "rows-per-message", 1),
    pingsBilled: !(values["no-ping-billing"] ?? false),
    pingIntervalSeconds: PING_INTERVAL_SECONDS,
    historyMessages: DEFAULTS.HISTORY_MAX_MESSAGES,
    ackBytes: values["ack-kib"] !== undefined ? num(values["ack-kib"], "ack-kib", 256) * 1024 : DEFAULTS.WINDOW_BYTES / 4,
  };

  const selfHosted = selfHostedCeilings(workload, costs, host);
  const cloudflare = cloudflareRoomCeilings(workload, costs, assumptions.ackBytes, assumptions.historyMessages);
  const cost = cloudflareMonthlyCost(workload, costs, CLOUDFLARE_PRICING, assumptions);
  const vpsOurs = vpsEstimate(workload, costs, vps);
  const vpsNode = vpsEstimate(workload, baseline.costs, vps);

  if (values.json) {
    process.stdout.write(
      `${JSON.stringify({ workload, costs, sources: ours.sources, host, selfHosted, cloudflare, cost, vps: { ours: vpsOurs, nodeWs: vpsNode }, baselineCosts: baseline.costs }, null, 2)}\n`,
    );
    return 0;
  }

  const out: string[] = [];
  out.push(
    `Workload: ${fmt(workload.connections)} connections, ${workload.messagesPerConnection} msg/s each, rooms of ${fmt(workload.roomSize)}, ${workload.payloadBytes} B payload, publishes via ${workload.publishVia}`,
  );
  out.push(`  = ${fmt(deliveriesPerSecond(workload))} deliveries/s (connections × msgs per connection × fan-out) in ${fmt(Math.ceil(workload.connections / workload.roomSize))} rooms`);
  out.push("");
  out.push("Measured inputs (ours):");
  out.push(`  server RSS per connection     ${fmt(costs.memoryPerConnectionBytes / 1024)} KB   [${ours.sources.memoryPerConnectionBytes}]`);
  out.push(`  kernel memory per connection  ${fmt(costs.kernelMemoryPerConnectionBytes / 1024)} KB   [${ours.sources.kernelMemoryPerConnectionBytes}]`);
  out.push(`  server CPU per delivery       ${fmt(costs.cpuPerDeliveryUs)} µs   [${ours.sources.cpuPerDeliveryUs}]`);
  out.push(`  server CPU per publish        ${fmt(costs.cpuPerPublishUs)} µs   [${ours.sources.cpuPerPublishUs}]`);
  out.push(`  handshakes per second         ${fmt(costs.handshakesPerSecond)}   [${ours.sources.handshakesPerSecond}] -> all reconnect in ~${fmt(workload.connections / costs.handshakesPerSecond)} s`);
  out.push("");
  out.push(
    ceilingTable(
      `Self-hosted workerd on ${host.name} (${fmt(host.descriptorLimit)} descriptors, ${fmt(host.memoryBytes / GB)} GB, ${host.serverThreads} thread, ${fmt(host.linkBitsPerSecond / 1e6)} Mbit/s):`,
      selfHosted,
    ),
  );
  out.push("");
  out.push(ceilingTable("Cloudflare, per room (one Durable Object per room; rooms scale out):", cloudflare));
  out.push("");
  out.push("Monthly cost on Cloudflare (Workers Paid):");
  for (const line of cost.lines) {
    out.push(`  ${line.item.padEnd(58)} ${fmt(line.quantity).padStart(16)} ${line.unit.padEnd(9)} ${`$${line.usd.toFixed(2)}`.padStart(10)}`);
  }
  out.push(`  ${"total".padEnd(58)} ${"".padStart(16)} ${"".padEnd(9)} ${`$${cost.totalUsd.toFixed(2)}`.padStart(10)}`);
  out.push("  assumptions:");
  for (const a of cost.assumptions) out.push(`   - ${a}`);
  out.push("");
  out.push(`Fixed-price servers (${vps.name}, $${vps.monthlyUsd}/month, ${fmt(vps.transferBytesPerMonth / 1e12)} TB transfer):`);
  const vpsLine = (name: string, e: typeof vpsOurs): string =>
    `  ${name.padEnd(34)} ${String(e.servers).padStart(5)} server(s) (bound by ${e.bindingResource}) + $${e.transferOverageUsd.toFixed(2)} transfer = $${e.monthlyUsd.toFixed(2)}/month${e.fitsOneRoom ? "" : "  (a room this size does not fit one thread)"}`;
  out.push(vpsLine("workerd (this service, self-hosted)", vpsOurs));
  out.push(vpsLine("Node ws baseline (measured alongside)", vpsNode));
  out.push(`  outgoing transfer: ${fmt(vpsOurs.outgoingBytesPerMonth / 1e12)} TB/month (free on Cloudflare), beyond the included at $${vps.transferOverageUsdPerGb}/GB`);
  out.push("  (servers needed ignores redundancy, a load balancer and routing rooms to servers)");
  process.stdout.write(`${out.join("\n")}\n`);
  return 0;
}

try {
  process.exit(main());
} catch (error) {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n\n${USAGE}`);
  process.exit(2);
}
