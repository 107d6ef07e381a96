/**
 * `npm run capacity -- [options]`: how many clients a deployment holds, what
 * runs out first, and what it costs per month on Cloudflare versus a small
 * fixed-price server. Measured inputs come from `npm run load` JSON results.
 */
import { readFileSync } from "node:fs";
import { totalmem } from "node:os";
import { parseValues, readNumber, type OptionSpecs } from "./kit/args";
import { DEFAULT_ACK_DELAY_MS } from "../../client-sdk/src/client";
import { PING_INTERVAL_SECONDS } from "../../protocol";
import { PUSHER_ACTIVITY_TIMEOUT_SECONDS } from "../../protocol/pusher";
import { DEFAULTS } from "../../common/settings";
import { cloudflareMonthlyCost, type CostAssumptions } from "./capacity/cloudflare-cost";
import { GB, fmt, kb } from "./capacity/format";
import { CENTRIFUGO, HOSTED_SERVICES } from "./capacity/hosted-pricing";
import { measuredCosts, measuredRowsPerMessage } from "./capacity/inputs";
import {
  acksPerConnection,
  cloudflareRoomResources,
  deliveriesPerSecond,
  selfHostedResources,
  vpsEstimate,
  type Host,
  type UnitCosts,
  type VpsOffer,
  type Workload,
} from "./capacity/model";
import { cloudflarePerMillion, hostedEstimate, referenceEstimate, vpsPerMillion } from "./capacity/per-million";
import { CLOUDFLARE_PRICING } from "./capacity/pricing";
import { formatWithUncertainty } from "./report/metrics";
import { costTable, perMillionTable, resourceTable, sourcesList } from "./capacity/render";
import { verdict } from "./capacity/verdict";
import { shardedFanout, type ShardCosts, type ShardShape, type ShardedFanout } from "./capacity/sharded";
import { shardCostsFrom } from "./capacity/sharded-inputs";
import { shardedGrid, shardedSection } from "./capacity/sharded-render";
import { breakEvenRoomRate, multiplexedFanout, type MuxEstimate } from "./capacity/multiplexed";
import { muxCostsFrom } from "./capacity/multiplexed-inputs";
import { multiplexedSection } from "./capacity/multiplexed-render";
import { usd } from "./capacity/format";
import { parseHistoryRules } from "../../common/retention";
import { parseRoomGroup, retentionCost, type RetentionInputs } from "./capacity/retention";
import { retentionSection } from "./capacity/retention-render";

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
  --cpu-per-ack US       override server CPU per incoming ack, µs (default 18, measured once: see load/README.md)
  --rows-per-message N   SQLite rows written per message = 1 ÷ messages per flush (default: measured from a
                         fanout --from result, else 1, an assumption); each flush is also one frame per socket
  --ephemeral            the rooms keep their messages in memory only (HISTORY_RULES "store": false): no row
                         written per message, nothing stored (flushes still set the frames per socket)

Self-hosted host (default: this machine):
  --host-memory-gb G     memory for the server, GB = 1,073,741,824 bytes (default: this machine's total minus 1 GB)
  --host-fds N           descriptor limit (default: this process's soft limit)
  --threads N            server threads (default 1: workerd and Node run a process's rooms on one thread)
  --link-mbit M          network link, decimal Mbit/s (default 1000)

Cloudflare assumptions:
  --session-minutes M    average connection life (default 60)
  --no-ping-billing      do not count the text heartbeat as a billed incoming message
  --ack-delay-ms D       clients ack at most D ms after a frame (default 1000, the SDK's ackDelayMs; the raw client uses 50)
  --ack-kib K            ... and at once when K KiB are unacknowledged (default: half the window)
  --clients C            sdk (default: the SDK's acks and its ping every 25 s) or pusher (stock Pusher clients,
                         docs/pusher.md: no acks, the window released by one pong per half window, and pusher-js's
                         ping after 120 s of silence, counted as if every connection were silent)

Fixed-price server to compare with:
  --vps-price USD        monthly price (default 6)
  --vps-memory-gb G      (default 1)   --vps-fds N (default 65536)   --vps-link-mbit M (default 1000)
  --vps-transfer-tb T    included outgoing transfer per server and month, 10^12 bytes (default 1)
  --vps-transfer-usd-per-gb P  transfer beyond that, USD per 10^9 bytes (default 0.01)

Sharded room on Cloudflare (docs/sharded-rooms.md); with --shard-sockets or --sharded-grid the tool prints
only the sharded room (its bill replaces the model of --connections above):
  --shard-sockets N      sockets per object (ROOM_SHARD_SOCKETS); 0 = chosen from --leaf-budget
  --room-rate R          messages per second into the room (default: msgs-per-conn × room-size);
                         the room's subscribers are --room-size
  --root-sockets N       sockets on the root itself (default: min(room, shard sockets), as a room that grew;
                         0 = all sockets placed on leaves, as after a reconnect storm)
  --sharded-grid         also print 100,000 and 1,000,000 subscribers at 1 and 10 msg/s
  --shard-from FILE      per-step costs from a sharded benchmark result (npm run bench -- sharded) (else the documented defaults)
  --leaf-budget F        share of a leaf's thread its sends and acks may take when choosing sockets per leaf (default 0.5)
  --send-us US, --push-issue-us US, --push-receive-us US, --rpc-latency-ms MS, --rpc-concurrency N
                         override one per-step cost

Multiplexed connections on Cloudflare (docs/multiplexing.md); with --rooms-per-connection the tool prints only
the multiplexed workload, in four designs side by side (hubs, an object per connection, a Worker-held socket,
and single-room sockets carrying the same subscriptions), and the hosted services' prices beside them:
  --rooms-per-connection K  rooms each of --connections follows (rooms = connections × K ÷ --room-size)
  --room-rate R          messages per second into each room (default: msgs-per-conn × room-size)
  --hubs N               MULTIPLEX_HUBS (default: the fewest that hold the connections at 80% of
                         --max-connections-per-hub and keep a hub's thread within --hub-budget)
  --max-connections-per-hub N  (default 2000)   --hub-budget F (default 0.5)
  --mux-from FILE        per-step costs from a multiplex benchmark result (npm run bench -- multiplex) (else the documented defaults)
History rules (docs/history.md); printed with --rule-rooms:
  --history-rules JSON   a HISTORY_RULES value, e.g. '[{"prefix":"chat:","maxMessages":10000,"maxAgeSeconds":86400}]'
  --rule-rooms P=N@R     N rooms whose names start with P, each with R messages/s (repeat; P "*" for the others)
  --history-max-messages N, --history-max-age S   the defaults rooms without a rule keep (default: DEFAULTS)
  --key-bytes B          idempotency key bytes per message (default 0: no keys)
  --dedupe-seconds S     PUBLISH_DEDUPE_SECONDS (default ${DEFAULTS.PUBLISH_DEDUPE_SECONDS})

  --details              after the verdict, everything behind it: the inputs and their sources, every
                         resource, the bill line by line, fixed-price servers, list prices, price sources
  --json                 machine-readable output (everything)
`;

function ownDescriptorLimit(): number {
  const limits = readFileSync("/proc/self/limits", "utf8");
  return Number(/Max open files\s+(\d+)/.exec(limits)?.[1] ?? 1024);
}

function num(v: string | undefined, name: string, fallback: number): number {
  return readNumber(v, name, fallback, { min: 0 });
}

/** The capacity tool's options (their help is USAGE). */
const CAPACITY_OPTIONS = {
  connections: {}, "msgs-per-conn": {}, "room-size": {}, payload: {}, "publish-via": {},
  from: { multiple: true }, "memory-per-conn": {}, "kernel-per-conn": {}, "cpu-per-delivery": {},
  "cpu-per-publish": {}, "cpu-per-ack": {}, "host-memory-gb": {}, "host-fds": {}, threads: {}, "link-mbit": {},
  "session-minutes": {}, "rows-per-message": {}, ephemeral: { flag: true }, "no-ping-billing": { flag: true }, "ack-delay-ms": {},
  "ack-kib": {}, clients: {}, "vps-price": {}, "vps-memory-gb": {}, "vps-fds": {}, "vps-link-mbit": {},
  "vps-transfer-tb": {}, "vps-transfer-usd-per-gb": {}, "shard-sockets": {}, "room-rate": {},
  "root-sockets": {}, "sharded-grid": { flag: true }, "shard-from": {}, "leaf-budget": {}, "send-us": {},
  "push-issue-us": {}, "push-receive-us": {}, "rpc-latency-ms": {}, "rpc-concurrency": {},
  "rooms-per-connection": {}, hubs: {}, "max-connections-per-hub": {}, "hub-budget": {}, "mux-from": {},
  "history-rules": {}, "rule-rooms": { multiple: true }, "history-max-messages": {}, "history-max-age": {},
  "key-bytes": {}, "dedupe-seconds": {}, json: { flag: true }, details: { flag: true },
} as const satisfies OptionSpecs;

function main(): number {
  const { values } = parseValues(process.argv.slice(2), CAPACITY_OPTIONS);
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
  if (values["cpu-per-ack"] !== undefined) overrides.cpuPerAckUs = num(values["cpu-per-ack"], "cpu-per-ack", 0);
  for (const key of Object.keys(overrides) as Array<keyof UnitCosts>) {
    ours.sources[key] = "command line";
    delete ours.plusMinus[key];
  }
  const costs: UnitCosts = { ...ours.costs, ...overrides };
  const baseline = measuredCosts(files, "baseline");
  const measuredRows = measuredRowsPerMessage(files);
  const rows =
    values["rows-per-message"] !== undefined
      ? { value: num(values["rows-per-message"], "rows-per-message", 1), source: "command line", measured: false }
      : measuredRows;
  if (!(rows.value > 0)) throw new Error("--rows-per-message must be above 0");

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
  const clients = values.clients ?? "sdk";
  if (clients !== "sdk" && clients !== "pusher") throw new Error(`--clients must be sdk or pusher, not ${clients}`);
  const pusherClients = clients === "pusher";
  const assumptions: CostAssumptions = {
    sessionSeconds: num(values["session-minutes"], "session-minutes", 60) * 60,
    workerCpuMsPerRequest: 1,
    rowsWrittenPerMessage: rows.value,
    ephemeral: values.ephemeral ?? false,
    pingsBilled: !(values["no-ping-billing"] ?? false),
    pingIntervalSeconds: pusherClients ? PUSHER_ACTIVITY_TIMEOUT_SECONDS : PING_INTERVAL_SECONDS,
    historyMessages: DEFAULTS.HISTORY_MAX_MESSAGES,
    ack: {
      // A Pusher client never acks: only the pong to the server's ping at half a window releases it.
      delaySeconds: pusherClients ? Number.POSITIVE_INFINITY : num(values["ack-delay-ms"], "ack-delay-ms", DEFAULT_ACK_DELAY_MS) / 1000,
      windowBytes: values["ack-kib"] !== undefined ? num(values["ack-kib"], "ack-kib", 512) * 1024 * 2 : DEFAULTS.WINDOW_BYTES,
    },
  };

  const selfHosted = selfHostedResources(workload, costs, host, assumptions);
  const cloudflare = cloudflareRoomResources(workload, costs, assumptions);
  const cost = cloudflareMonthlyCost(workload, costs, CLOUDFLARE_PRICING, assumptions);
  const vpsOurs = vpsEstimate(workload, costs, vps, assumptions);
  const vpsNode = vpsEstimate(workload, baseline.costs, vps, assumptions);
  const perMillion = [
    cloudflarePerMillion(cost),
    vpsPerMillion(vpsOurs, workload, "this service self-hosted (workerd)"),
    ...HOSTED_SERVICES.map((s) => hostedEstimate(workload, s)),
    referenceEstimate(workload, CENTRIFUGO, vps),
  ];

  // A sharded room: one room of --room-size subscribers, from per-step costs.
  const wantSharded = values["shard-sockets"] !== undefined || values["sharded-grid"] === true;
  const shard = shardCostsFrom(values["shard-from"]);
  const shardOverrides: Array<[keyof ShardCosts, string]> = [
    ["sendUs", "send-us"],
    ["pushIssueUs", "push-issue-us"],
    ["pushReceiveUs", "push-receive-us"],
    ["rpcLatencyMs", "rpc-latency-ms"],
    ["rpcConcurrency", "rpc-concurrency"],
  ];
  for (const [key, flag] of shardOverrides) {
    const v = values[flag as keyof typeof values];
    if (typeof v !== "string") continue;
    shard.costs[key] = num(v, flag, shard.costs[key]);
    shard.sources[key] = "command line";
  }
  shard.costs.ackUs = costs.cpuPerAckUs;
  shard.sources.ackUs = ours.sources.cpuPerAckUs;
  const shapeFor = (subscribers: number, rate: number, shardSockets: number): ShardShape => ({
    subscribers,
    messagesPerSecond: rate,
    shardSockets,
    ...(values["root-sockets"] !== undefined ? { rootSockets: num(values["root-sockets"], "root-sockets", 0) } : {}),
    leafBudget: Math.min(1, Math.max(0.01, num(values["leaf-budget"], "leaf-budget", 0.5))),
    acksPerSocketAt: (frames) => (frames <= 0 ? 0 : frames / (1 + frames * assumptions.ack.delaySeconds)),
    sessionSeconds: assumptions.sessionSeconds,
    pingsPerSocketPerSecond: assumptions.pingsBilled ? 1 / assumptions.pingIntervalSeconds : 0,
  });
  const shardSockets = num(values["shard-sockets"], "shard-sockets", 0);
  const roomRate = num(values["room-rate"], "room-rate", workload.messagesPerConnection * workload.roomSize);
  const sharded = wantSharded ? shardedFanout(shapeFor(workload.roomSize, roomRate, shardSockets), shard.costs, CLOUDFLARE_PRICING) : undefined;
  const grid = values["sharded-grid"]
    ? [100_000, 1_000_000].flatMap((n) => [1, 10].map((rate) => shardedFanout(shapeFor(n, rate, shardSockets), shard.costs, CLOUDFLARE_PRICING)))
    : undefined;

  // Multiplexed connections are their own question too: the same subscriptions in four designs.
  if (values["rooms-per-connection"] !== undefined) {
    const mux = muxCostsFrom(values["mux-from"]);
    mux.costs.ackUs = costs.cpuPerAckUs;
    mux.sources.ackUs = ours.sources.cpuPerAckUs;
    const perConnection = Math.max(1, Math.round(num(values["rooms-per-connection"], "rooms-per-connection", 1)));
    const shape = {
        connections: workload.connections,
        roomsPerConnection: perConnection,
        followersPerRoom: workload.roomSize,
        roomRate,
        publishVia: workload.publishVia,
        hubs: Math.round(num(values.hubs, "hubs", 0)),
        maxConnectionsPerHub: num(values["max-connections-per-hub"], "max-connections-per-hub", DEFAULTS.MAX_CONNECTIONS_PER_HUB),
        hubBudget: Math.min(1, Math.max(0.01, num(values["hub-budget"], "hub-budget", 0.5))),
        rowsPerMessage: rows.value,
        sessionSeconds: assumptions.sessionSeconds,
        pingsBilled: assumptions.pingsBilled,
        pingIntervalSeconds: assumptions.pingIntervalSeconds,
        acksAt: (frames: number) => (frames <= 0 ? 0 : frames / (1 + frames * assumptions.ack.delaySeconds)),
    };
    const estimate = multiplexedFanout(shape, mux.costs, CLOUDFLARE_PRICING);
    const breakEven = breakEvenRoomRate(shape, mux.costs, CLOUDFLARE_PRICING);
    const hosted = hostedLines(estimate, workload);
    if (values.json) {
      process.stdout.write(`${JSON.stringify({ multiplexed: { ...estimate, shape: { ...estimate.shape, acksAt: undefined } }, breakEvenRoomRate: breakEven ?? null, muxCosts: mux.costs, muxSources: mux.sources, perMillionDelivered: hosted }, null, 2)}\n`);
      return 0;
    }
    const even =
      breakEven === undefined
        ? "  hubs and single-room sockets do not cost the same at any rate from 0.001 to 1,000 msg/s per room"
        : `  hubs cost less than single-room sockets below ${fmt(breakEven)} msg/s per room (this shape otherwise); above it the pushes (billed requests) cost more than the extra sockets`;
    const out = [multiplexedSection(estimate, mux.costs, mux.sources), even, "", perMillionTable("Cost per million delivered messages beside list prices (the hosted services count connections, not sockets):", hosted), "", sourcesList("Cloudflare prices used:", CLOUDFLARE_PRICING.sources)];
    out.push("(the multiplexed workload alone; without --rooms-per-connection the tool models --connections in rooms of --room-size)");
    process.stdout.write(`${out.join("\n")}\n`);
    return 0;
  }

  // History rules: what a rule set stores and writes for rooms grouped by prefix.
  const groups = (values["rule-rooms"] ?? []).map(parseRoomGroup);
  const retentionInputs: RetentionInputs = {
    rules: parseHistoryRules(values["history-rules"] ?? ""),
    defaults: {
      HISTORY_MAX_MESSAGES: num(values["history-max-messages"], "history-max-messages", DEFAULTS.HISTORY_MAX_MESSAGES),
      HISTORY_MAX_AGE_SECONDS: num(values["history-max-age"], "history-max-age", DEFAULTS.HISTORY_MAX_AGE_SECONDS),
    },
    dedupeSeconds: num(values["dedupe-seconds"], "dedupe-seconds", DEFAULTS.PUBLISH_DEDUPE_SECONDS),
    payloadBytes: workload.payloadBytes,
    keyBytes: num(values["key-bytes"], "key-bytes", 0),
    rowsPerMessage: rows.value,
  };
  const retention = groups.length > 0 ? retentionCost(groups, retentionInputs, CLOUDFLARE_PRICING) : undefined;

  // A rule set's history is its own question too: what those groups of rooms store and write.
  if (retention && !wantSharded) {
    if (values.json) {
      process.stdout.write(`${JSON.stringify({ retention }, null, 2)}\n`);
      return 0;
    }
    process.stdout.write(`${retentionSection(retention, retentionInputs)}\n(the rooms of --rule-rooms under --history-rules; without --rule-rooms the tool models --connections in rooms of --room-size)\n`);
    return 0;
  }

  // A sharded room is its own question, with its own bill: the many-rooms
  // model of --connections would answer another one beside it.
  if (wantSharded) {
    if (values.json) {
      const plain = (r: ShardedFanout) => ({ ...r, shape: { ...r.shape, acksPerSocketAt: undefined } });
      process.stdout.write(
        `${JSON.stringify({ ...(sharded ? { sharded: plain(sharded) } : {}), shardCosts: shard.costs, shardSources: shard.sources, ...(grid ? { shardedGrid: grid.map(plain) } : {}) }, null, 2)}\n`,
      );
      return 0;
    }
    const out = [sharded ? shardedSection(sharded, shard.costs, shard.sources) : "", grid ? shardedGrid(grid) : ""].filter(Boolean);
    out.push("(one sharded room; without --shard-sockets and --sharded-grid the tool models --connections in rooms of --room-size)");
    process.stdout.write(`${out.join("\n\n")}\n`);
    return 0;
  }

  if (values.json) {
    process.stdout.write(
      `${JSON.stringify(
        {
          workload,
          costs,
          sources: ours.sources,
          plusMinus: ours.plusMinus,
          rowsWrittenPerMessage: rows,
          host,
          selfHosted,
          cloudflare,
          cost,
          vps: { ours: vpsOurs, nodeWs: vpsNode },
          baselineCosts: baseline.costs,
          perMillionDelivered: perMillion,
          pricingSources: CLOUDFLARE_PRICING.sources,
        },
        null,
        2,
      )}\n`,
    );
    return 0;
  }

  // The answer first, in a few lines; the tables behind it only when asked for.
  const answer = verdict({ workload, cloudflare, cost, selfHosted, hostName: host.name, vps: vpsOurs });
  if (!values.details) {
    process.stdout.write(`${[...answer, "", "Details (inputs and sources, every resource, the bill line by line, list prices): add --details"].join("\n")}\n`);
    return 0;
  }
  const out: string[] = [...answer, ""];
  const acks = acksPerConnection(workload, rows.value, assumptions.ack);
  out.push(
    `Workload: ${fmt(workload.connections)} connections, ${workload.messagesPerConnection} msg/s each, rooms of ${fmt(workload.roomSize)}, ${workload.payloadBytes} B payload, publishes via ${workload.publishVia}`,
  );
  out.push(`  = ${fmt(deliveriesPerSecond(workload))} deliveries/s (connections × msgs per connection × fan-out) in ${fmt(Math.ceil(workload.connections / workload.roomSize))} rooms`);
  out.push("");
  out.push("Measured inputs (ours):");
  out.push(`  server RSS per connection     ${kb(costs.memoryPerConnectionBytes)}   [${ours.sources.memoryPerConnectionBytes}]`);
  out.push(`  kernel memory per connection  ${kb(costs.kernelMemoryPerConnectionBytes)}   [${ours.sources.kernelMemoryPerConnectionBytes}]`);
  out.push(`  server CPU per delivery       ${formatWithUncertainty(costs.cpuPerDeliveryUs, ours.plusMinus.cpuPerDeliveryUs, "us")}   [${ours.sources.cpuPerDeliveryUs}]`);
  out.push(`  server CPU per publish        ${fmt(costs.cpuPerPublishUs)} µs   [${ours.sources.cpuPerPublishUs}]`);
  out.push(`  server CPU per ack            ${fmt(costs.cpuPerAckUs)} µs   [${ours.sources.cpuPerAckUs}]`);
  out.push(`  SQLite rows per message       ${fmt(rows.value)}   [${rows.measured ? "measured: " : ""}${rows.source}]`);
  out.push(`  acks per connection           ${fmt(acks)}/s   [derived: ${fmt(assumptions.ack.delaySeconds * 1000)} ms ack delay, half of a ${fmt(assumptions.ack.windowBytes / 1024)} KiB window]`);
  out.push(`  handshakes per second         ${fmt(costs.handshakesPerSecond)}   [${ours.sources.handshakesPerSecond}] -> all reconnect in ~${fmt(workload.connections / costs.handshakesPerSecond)} s`);
  out.push("");
  out.push(
    resourceTable(
      `Self-hosted workerd on ${host.name} (${fmt(host.descriptorLimit)} descriptors, ${fmt(host.memoryBytes / GB)} GB, ${host.serverThreads} thread, ${fmt(host.linkBitsPerSecond / 1e6)} Mbit/s):`,
      selfHosted,
    ),
  );
  out.push("");
  out.push(resourceTable("Cloudflare, per room (one Durable Object per room; rooms scale out):", cloudflare));
  out.push("");
  out.push(costTable("Monthly cost on Cloudflare (Workers Paid):", cost));
  out.push("");
  out.push(`Fixed-price servers (${vps.name}, $${vps.monthlyUsd}/month, ${fmt(vps.transferBytesPerMonth / 1e12)} TB transfer):`);
  const vpsLine = (name: string, e: typeof vpsOurs): string =>
    `  ${name.padEnd(34)} ${String(e.servers).padStart(5)} server(s) (bound by ${e.bindingResource}) + $${e.transferOverageUsd.toFixed(2)} transfer = $${e.monthlyUsd.toFixed(2)}/month${e.fitsOneRoom ? "" : "  (a room this size does not fit one thread)"}`;
  out.push(vpsLine("workerd (this service, self-hosted)", vpsOurs));
  out.push(vpsLine("Node ws baseline (measured alongside)", vpsNode));
  out.push(`  outgoing transfer: ${fmt(vpsOurs.outgoingBytesPerMonth / 1e12)} TB/month (free on Cloudflare), beyond the included at $${vps.transferOverageUsdPerGb}/GB (TB and GB here are 10^12 and 10^9 bytes, as transfer is sold)`);
  out.push("  (servers needed ignores redundancy, a load balancer and routing rooms to servers)");
  out.push("");
  out.push(perMillionTable(`Cost per million delivered messages (${fmt(cost.deliveriesPerMonth / 1e6)} million deliveries a month), beside list prices:`, perMillion));
  out.push("");
  out.push(sourcesList("Cloudflare prices used:", CLOUDFLARE_PRICING.sources));
  process.stdout.write(`${out.join("\n")}\n`);
  return 0;
}

/**
 * The per-million lines of the multiplexed workload: each design's bill, then the hosted services as they
 * would count it (C connections, each receiving its K rooms; rooms × rate publishes).
 */
function hostedLines(e: MuxEstimate, w: Workload) {
  const s = e.shape;
  const deliveries = e.deliveriesPerSecond;
  const ours = e.designs.map((d) => ({
    service: `this service on Cloudflare, ${d.design}`,
    plan: "Workers Paid",
    usdPerMillionDelivered: d.usdPerMillionDelivered,
    monthlyUsd: d.monthlyUsd,
    basis: `the estimated bill ${usd(d.monthlyUsd)}/month over ${fmt((deliveries * 30 * 86_400) / 1e6)} million deliveries`,
    fits: d.limits.every((l) => l.ok) ? "within the platform's limits" : `over: ${d.limits.filter((l) => !l.ok).map((l) => l.name).join("; ")}`,
    messageMeaning: "billed: requests (upgrades, publishes, pushes), incoming socket messages at 20:1, duration while active, rows written per flush",
    sources: [],
    notes: [],
  }));
  // As a hosted service sees it: C connections, each publishing its share so that rooms × rate messages go out to F followers.
  const hostedWorkload: Workload = {
    ...w,
    connections: s.connections,
    roomSize: s.followersPerRoom,
    messagesPerConnection: (e.rooms * s.roomRate) / s.connections,
    channels: e.rooms,
  };
  return [...ours, ...HOSTED_SERVICES.map((service) => hostedEstimate(hostedWorkload, service))];
}

try {
  process.exit(main());
} catch (error) {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n\n${USAGE}`);
  process.exit(2);
}
