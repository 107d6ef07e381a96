import { resolve } from "node:path";
import { MAX_ROOMS_PER_CONNECTION } from "../../common/settings";
import { parseValues, readChoice, readNumber, readPairs, UsageRequested, type OptionSpecs } from "./kit/args";
import { BASELINES, baselineNamed, type Baseline } from "./kit/baselines";

export const SCENARIOS = ["connect", "fanout", "slow", "storm", "broadcast"] as const;
export type ScenarioName = (typeof SCENARIOS)[number];

/** Sockets one run may open in total, whatever is asked: the machine's descriptor budget is shared. */
export const HARD_SOCKET_CAP = 16_000;
/** No run lasts longer than this, whatever is asked. */
export const HARD_TIME_CAP_SECONDS = 900;

export interface LoadOptions {
  scenario: ScenarioName;
  // target
  url: string;
  spawn: boolean;
  port: number;
  /** The baselines (kit/baselines.ts) to run against too, by name, in the table's order. */
  baselines: string[];
  baselineOnly: boolean;
  /** The Node baseline commits each message to SQLite before answering its publish (like the service). */
  baselineDurable: boolean;
  /** Each baseline port option's value (--baseline-port, --bare-port...). */
  ports: Record<string, number>;
  /** The --spawn'ed local server's accept gate (local-server/: the launcher relays connections to workerd). */
  serverGate: "auto" | "on" | "off";
  serverPid: number | undefined;
  allowRemote: boolean;
  /** Extra HTTP headers for publishes ("Name: value"), e.g. credentials. */
  publishHeaders: Record<string, string>;
  /** Extra query parameters on socket URLs ("name=value"), e.g. a token. */
  wsParams: Record<string, string>;
  /** wrangler.toml var overrides for a --spawn'ed server ("KEY=VALUE"), e.g. BATCH_MAX_EVENTS=1. */
  serverVars: Record<string, string>;
  /** Another checkout of the service whose local server --spawn starts (an earlier commit, to measure a change side by side). */
  serverDir: string | undefined;
  // client side
  procs: number;
  sources: number;
  inFlight: number;
  handshakeTimeoutMs: number;
  ackBytes: number;
  /**
   * Rooms each connection follows over one multiplexed connection (`GET /ws`); 0 = one socket per room.
   * With it, `sockets` stays the followers of each room, so the same options describe the same
   * subscriptions either way: rooms × sockets ÷ mux connections (connect: `sockets` connections).
   */
  mux: number;
  /** The --mux connections speak Pusher (the front door, `/app/{key}`): each follows its rooms as channels. */
  pusher: boolean;
  /** fanout with --mux: hostile connections beside the run that never read and send subscribes the hubs refuse (RefusalStorm). */
  refusers: number;
  /** Frames each refusing connection sends. */
  refusals: number;
  /** Frames per second each refusing connection sends (0: as fast as its socket takes them). */
  refusalRate: number;
  /** What the refusing connections send: refused subscribes, or heartbeats the runtime answers (the floor). */
  refusalFrame: "subscribe" | "ping";
  // shape
  sockets: number;
  rooms: number;
  wave: number;
  holdSeconds: number;
  rate: number;
  /** Publishes in flight per room at once. */
  publishers: number;
  payloadBytes: number;
  durationSeconds: number;
  deadlineMs: number;
  slowFraction: number;
  /** slow: exactly this many stalled clients, spread evenly over the sockets (overrides slowFraction); -1 = unset. */
  slowCount: number;
  stallSeconds: number;
  dropAtSeconds: number;
  dropMode: "client" | "server";
  backoffBaseMs: number;
  backoffMaxMs: number;
  select: "rooms" | "prefix";
  // output and bounds
  sampleMs: number;
  maxSeconds: number;
  json: boolean;
  out: string | undefined;
  report: boolean;
  quiet: boolean;
}

/** Per-scenario defaults; anything given on the command line wins. */
const DEFAULTS: Record<ScenarioName, Partial<LoadOptions>> = {
  connect: { sockets: 1000, rooms: 1, holdSeconds: 10, wave: 500 },
  fanout: { sockets: 1000, rooms: 1, rate: 2, payloadBytes: 100, durationSeconds: 15, deadlineMs: 5000 },
  // 50 × 4 KB messages/s: a stalled reader falls 1 MiB (the default window) behind in about 5 s.
  slow: { sockets: 200, rooms: 1, rate: 50, payloadBytes: 4000, durationSeconds: 20, deadlineMs: 5000, slowFraction: 0.1 },
  storm: { sockets: 1000, rooms: 1, rate: 5, payloadBytes: 100, durationSeconds: 20, deadlineMs: 30_000, dropAtSeconds: 5 },
  broadcast: { sockets: 100, rooms: 10, rate: 1, payloadBytes: 100, durationSeconds: 10, deadlineMs: 5000 },
};

export const USAGE = `Usage: npm run load -- <scenario> [options]

Scenarios:
  connect     open sockets in waves (bounded handshakes in flight), report rate and failures by cause, hold idle
  fanout      rooms x sockets, publisher at --rate; end-to-end latency matched by room and seq, losses apart
  slow        like fanout, but --slow-fraction of the clients stop reading; what the others see, when the slow close
  storm       drop every connection at --drop-at (client side, or --mode server: restart the server) and let
              clients reconnect with full-jitter backoff and since=; time until all are back, messages lost
  broadcast   POST /broadcast to every room (coordinator); latency and loss per receiving socket

Target (loopback only unless --allow-remote):
  --url URL              target service (default http://127.0.0.1:8787); ws/wss/http/https accepted
  --spawn                start the local server (local-server/server.mjs) on --port for this run
  --port N               port for --spawn (default 18201)
  --baseline-only        run only against the baselines named (the Node one when none is named)
${baselineUsage()}
  --baseline-durable     the Node baseline commits history to SQLite (WAL, synchronous=FULL) before it answers each
                         publish, as the service does (needs: npm install --no-save better-sqlite3@12.11.1)
  --server-pid PID       process to sample (default: whoever listens on the target port)
  --allow-remote         allow a non-loopback target (a deployment you own; no server sampling)
  --publish-header H     "Name: value" header on publishes/broadcasts (repeatable), e.g. credentials
  --ws-param P           "name=value" query parameter on socket URLs (repeatable), e.g. a token
  --server-var KV        "KEY=VALUE" var override for the --spawn'ed server (repeatable), e.g. BATCH_MAX_EVENTS=1
  --server-dir DIR       --spawn the local server of another checkout (e.g. an earlier commit in a git worktree),
                         to measure a change side by side with the compare benchmark
  --server-gate MODE     the --spawn'ed server's accept gate: auto (the launcher's default: on below 262,144
                         descriptors), on, off. With it on the launcher relays every connection; its CPU is
                         reported beside workerd's. Off, the tool sets the launcher's connection ceiling to the
                         run's sockets + 1,024 descriptors (CONNECTION_CEILING in the environment wins)

Shape:
  --sockets N            sockets per room (connect: total) (hard cap ${HARD_SOCKET_CAP} in total)
  --rooms N              rooms (sockets spread evenly)
  --wave N               connect: sockets per wave (default 500)
  --in-flight N          handshakes in flight at once, all processes together (default 256)
  --hold S               connect: seconds to hold the sockets idle (default 10)
  --rate R               messages per second per room (broadcast: broadcasts per second)
  --publishers N         publishes in flight per room at once (default 1; more outruns a slow fan-out)
  --payload B            payload size in bytes (JSON of the published value)
  --duration S           seconds of publishing
  --deadline MS          a message not received within MS of its ts is lost, not latency
  --slow-fraction F      slow: share of clients that stop reading (default 0.1)
  --slow-count N         slow: exactly N clients stop reading, spread evenly (overrides --slow-fraction)
  --stall S              slow: seconds the slow clients stay stalled (default: --duration)
  --drop-at S            storm: seconds after publishing starts to drop everything (default 5)
  --mode client|server   storm: drop client sockets, or restart the spawned server (default client)
  --backoff-base MS      storm: reconnect backoff base (default 200), full jitter
  --backoff-max MS       storm: reconnect backoff cap (default 5000)
  --select rooms|prefix  broadcast: address rooms by list or by prefix (default rooms)

Client side:
  --procs N              client processes (default 2)
  --sources N            loopback source addresses 127.0.0.2.. (default 4; 0 = OS default)
  --handshake-timeout MS default 10000
  --ack-bytes B          ack after B unacknowledged bytes (default: a quarter of the welcome's window)

Multiplexed connections (GET /ws; every delivery matched by room and seq per subscription):
  --mux K                each connection follows K rooms (subscribe per room, acks naming the room).
                         --sockets stays the followers per room: rooms x sockets / K connections, connection c
                         following rooms cK .. cK+K-1 (mod --rooms). connect: --sockets connections, opened
                         first and then all subscribing at once (a subscribe storm, timed apart)
  --pusher               with --mux K: each connection is a Pusher connection (/app/{key}, docs/pusher.md) following
                         K channels, and the rooms are those channels' (pusher:1:...); the --spawn'ed server gets the
                         Pusher app (id 1, key load-key). A Pusher connection has no seq: a channel's n-th event is
                         its room's seq n, and latency is measured from the publisher's send time
  --refusers N           fanout --mux: N more connections that never read and, while the run publishes, send
                         subscribes that are refused (a room they already follow): what the honest readers
                         beside them see; how the server closed them
  --refusals N           frames each refusing connection sends at most (default 12000)
  --refusal-rate R       frames per second each refusing connection sends (default 0: as fast as it can)
  --refusal-frame F      subscribe (default), or ping: the same connections sending heartbeats, which the
                         runtime answers without running the service's code (the floor beside the storm)

Output and bounds:
  --json                 print the result as JSON on stdout (human output goes to stderr)
  --out DIR              where to write the JSON and HTML report (default load/results)
  --no-report            do not write report files
  --sample-ms MS         sampling interval (default 500)
  --max-seconds S        hard time limit for the whole invocation (default: computed, at most ${HARD_TIME_CAP_SECONDS})
  --quiet                no live progress
`;

function num(value: string | undefined, name: string, fallback: number, min: number, max: number): number {
  return readNumber(value, name, fallback, { min, max });
}

function int(value: string | undefined, name: string, fallback: number, min: number, max: number): number {
  return readNumber(value, name, fallback, { min, max, integer: true });
}

/** The baselines' flags and port options, from their table. */
function baselineUsage(): string {
  const line = (left: string, text: string): string => (left.length < 23 ? `  ${left.padEnd(23)}${text}` : `  ${left}\n${" ".repeat(25)}${text}`);
  const lines = BASELINES.filter((b) => b.flag).map((b) => line(`--${b.flag}`, b.help));
  const ports = new Map(BASELINES.map((b) => [b.port.option, b.port.default] as const));
  for (const [option, port] of ports) lines.push(line(`--${option} N`, `port of ${BASELINES.filter((b) => b.port.option === option).map((b) => `${b.name}${b.port.offset ? ` (+${b.port.offset})` : ""}`).join(", ")} (default ${port})`));
  return lines.join("\n");
}

/** The load tool's options (their help is USAGE, grouped by what they are for), the baselines' flags and ports from their table. */
const LOAD_OPTIONS = {
  ...Object.fromEntries(BASELINES.flatMap((b) => [...(b.flag ? [[b.flag, { flag: true }] as const] : []), [b.port.option, {}] as const])),
  url: {}, spawn: { flag: true }, port: {}, "baseline-only": { flag: true }, "baseline-durable": { flag: true }, "server-gate": {}, "server-dir": {}, "server-pid": {},
  "allow-remote": { flag: true }, "publish-header": { multiple: true }, "ws-param": { multiple: true }, "server-var": { multiple: true },
  procs: {}, sources: {}, "in-flight": {}, "handshake-timeout": {}, "ack-bytes": {}, mux: {}, pusher: { flag: true }, refusers: {}, refusals: {}, "refusal-rate": {}, "refusal-frame": {}, sockets: {}, rooms: {}, wave: {}, hold: {}, rate: {}, publishers: {},
  payload: {}, duration: {}, deadline: {}, "slow-fraction": {}, "slow-count": {}, stall: {}, "drop-at": {}, mode: {}, "backoff-base": {}, "backoff-max": {}, select: {},
  "sample-ms": {}, "max-seconds": {}, json: { flag: true }, out: {}, "no-report": { flag: true }, quiet: { flag: true },
} as const satisfies OptionSpecs;

export function parseLoadOptions(argv: string[]): LoadOptions {
  const { values, positionals } = parseValues(argv, LOAD_OPTIONS, true);
  if (values.help) throw new UsageRequested();
  const scenario = positionals[0];
  if (!scenario || !(SCENARIOS as readonly string[]).includes(scenario)) {
    throw new Error(`unknown or missing scenario ${JSON.stringify(scenario ?? "")}; one of ${SCENARIOS.join(", ")}`);
  }
  const name = scenario as ScenarioName;
  const d = DEFAULTS[name];
  const mode = readChoice(values.mode, "mode", ["client", "server"], "client");
  const select = readChoice(values.select, "select", ["rooms", "prefix"], "rooms");
  const given = values as Record<string, string | boolean | string[] | undefined>;

  const options: LoadOptions = {
    scenario: name,
    url: values.url ?? "http://127.0.0.1:8787",
    spawn: values.spawn ?? false,
    port: int(values.port, "port", 18201, 1, 65535),
    baselines: BASELINES.filter((b) => b.flag && given[b.flag] === true).map((b) => b.name),
    baselineOnly: values["baseline-only"] ?? false,
    baselineDurable: values["baseline-durable"] ?? false,
    ports: Object.fromEntries(BASELINES.map((b) => [b.port.option, int(given[b.port.option] as string | undefined, b.port.option, b.port.default, 1, 65534)])),
    serverGate: readChoice(values["server-gate"], "server-gate", ["auto", "on", "off"], "auto"),
    serverPid: values["server-pid"] === undefined ? undefined : int(values["server-pid"], "server-pid", 0, 1, 2 ** 22),
    allowRemote: values["allow-remote"] ?? false,
    publishHeaders: readPairs(values["publish-header"] ?? [], ":", "publish-header"),
    wsParams: readPairs(values["ws-param"] ?? [], "=", "ws-param"),
    serverVars: readPairs(values["server-var"] ?? [], "=", "server-var"),
    serverDir: values["server-dir"] === undefined ? undefined : resolve(values["server-dir"]),
    procs: int(values.procs, "procs", 2, 1, 16),
    sources: int(values.sources, "sources", 4, 0, 64),
    inFlight: int(values["in-flight"], "in-flight", 256, 1, 4096),
    handshakeTimeoutMs: int(values["handshake-timeout"], "handshake-timeout", 10_000, 100, 120_000),
    ackBytes: int(values["ack-bytes"], "ack-bytes", 0, 0, 64 * 1024 * 1024),
    mux: int(values.mux, "mux", 0, 0, MAX_ROOMS_PER_CONNECTION),
    pusher: values.pusher ?? false,
    refusers: int(values.refusers, "refusers", 0, 0, 100),
    refusals: int(values.refusals, "refusals", 12_000, 1, 1_000_000),
    refusalRate: num(values["refusal-rate"], "refusal-rate", 0, 0, 1_000_000),
    refusalFrame: readChoice(values["refusal-frame"], "refusal-frame", ["subscribe", "ping"], "subscribe"),
    sockets: int(values.sockets, "sockets", d.sockets ?? 1000, 1, HARD_SOCKET_CAP),
    rooms: int(values.rooms, "rooms", d.rooms ?? 1, 1, 1000),
    wave: int(values.wave, "wave", d.wave ?? HARD_SOCKET_CAP, 1, HARD_SOCKET_CAP),
    holdSeconds: num(values.hold, "hold", d.holdSeconds ?? 5, 0, 600),
    rate: num(values.rate, "rate", d.rate ?? 1, 0.01, 10_000),
    publishers: num(values.publishers, "publishers", 1, 1, 256),
    payloadBytes: int(values.payload, "payload", d.payloadBytes ?? 100, 0, 60 * 1024),
    durationSeconds: num(values.duration, "duration", d.durationSeconds ?? 10, 1, 600),
    deadlineMs: int(values.deadline, "deadline", d.deadlineMs ?? 5000, 10, 120_000),
    slowFraction: num(values["slow-fraction"], "slow-fraction", d.slowFraction ?? 0, 0, 1),
    slowCount: int(values["slow-count"], "slow-count", -1, 0, HARD_SOCKET_CAP),
    stallSeconds: num(values.stall, "stall", -1, 0, 600),
    dropAtSeconds: num(values["drop-at"], "drop-at", d.dropAtSeconds ?? 5, 0, 600),
    dropMode: mode,
    backoffBaseMs: int(values["backoff-base"], "backoff-base", 200, 1, 60_000),
    backoffMaxMs: int(values["backoff-max"], "backoff-max", 5000, 1, 300_000),
    select,
    sampleMs: int(values["sample-ms"], "sample-ms", 500, 50, 60_000),
    maxSeconds: num(values["max-seconds"], "max-seconds", 0, 0, HARD_TIME_CAP_SECONDS),
    json: values.json ?? false,
    out: values.out,
    report: !(values["no-report"] ?? false),
    quiet: values.quiet ?? false,
  };
  if (options.stallSeconds < 0) options.stallSeconds = options.durationSeconds;
  if (options.mux > 0) muxProblem(options);
  if (options.pusher && (options.mux === 0 || options.baselines.length > 0)) throw new Error("--pusher goes with --mux K, against the service only (no baseline speaks Pusher)");
  if (options.refusers > 0 && (name !== "fanout" || options.mux === 0 || options.pusher)) throw new Error("--refusers is for fanout --mux (multiplexed connections)");
  const total = totalSockets(options);
  if (options.slowCount > total) throw new Error(`--slow-count ${options.slowCount} is more than the ${total} sockets of the run`);
  if (total > HARD_SOCKET_CAP) {
    throw new Error(`${total} sockets requested; one run opens at most ${HARD_SOCKET_CAP} (descriptors are shared on this machine)`);
  }
  if (options.dropAtSeconds >= options.durationSeconds && name === "storm") {
    throw new Error("--drop-at must be earlier than --duration");
  }
  return options;
}

/**
 * Sockets a run opens: `--sockets` is per room except for connect, where it is the total. With `--mux K`
 * each socket is one connection that follows K rooms, so rooms × sockets subscriptions take a K-th of them.
 */
export function totalSockets(options: Pick<LoadOptions, "scenario" | "sockets" | "rooms"> & { mux?: number }): number {
  if (options.scenario === "connect") return options.sockets;
  const subscriptions = options.sockets * options.rooms;
  return options.mux ? Math.ceil(subscriptions / options.mux) : subscriptions;
}

/** Subscriptions a run holds: one per socket, or K per multiplexed connection. */
export function totalSubscriptions(options: Pick<LoadOptions, "scenario" | "sockets" | "rooms" | "mux">): number {
  return options.mux > 0 ? totalSockets(options) * options.mux : totalSockets(options);
}

/**
 * The rooms multiplexed connection `index` follows: `perConnection` consecutive rooms from
 * index × perConnection, wrapping around `rooms`. Connections side by side tile the rooms, so with
 * connections × perConnection = rooms × followers every room has exactly `followers` of them.
 */
export function muxRoomsOf(index: number, perConnection: number, rooms: readonly string[]): string[] {
  return Array.from({ length: perConnection }, (_, j) => rooms[(index * perConnection + j) % rooms.length] as string);
}

/** Why a --mux run cannot be what it says: every room the same followers, no connection following a room twice. */
function muxProblem(options: LoadOptions): void {
  if (options.mux > options.rooms) throw new Error(`--mux ${options.mux} is more rooms than the run has (--rooms ${options.rooms})`);
  if (options.scenario === "broadcast") throw new Error("--mux is for connect, fanout, slow and storm");
  // The bare workerd baseline holds a multiplexed connection in its Worker (load/baselines/bare-workerd/relay.ts); the Node one has none.
  for (const label of targetLabels(options)) {
    const baseline = label === "ours" ? undefined : baselineOf(options, label);
    if (baseline && !baseline.multiplexed) throw new Error(`--mux runs against the service and the baselines that serve GET /ws: ${baseline.title} has none`);
  }
  if (options.scenario !== "connect" && (options.sockets * options.rooms) % options.mux !== 0) {
    throw new Error(`--rooms ${options.rooms} × --sockets ${options.sockets} subscriptions do not divide into connections of --mux ${options.mux}`);
  }
}

/**
 * The descriptor ceiling the load tool gives the local server it spawns with `--server-gate off`:
 * without the gate the launcher admits upgrades up to a quarter of its descriptor limit (5,000 of
 * 20,000), counting every descriptor workerd holds, so a run of 5,000 sockets would meet it and see
 * its last upgrades refused with 503 `over_capacity`, where the floors, which have no ceiling,
 * connect them all. Room for the run's sockets and the storage beside them; a CONNECTION_CEILING of
 * the caller's own wins. Undefined: the launcher's own.
 */
export function spawnedCeiling(options: Pick<LoadOptions, "serverGate" | "scenario" | "sockets" | "rooms" | "mux">, env: NodeJS.ProcessEnv = process.env): number | undefined {
  if (options.serverGate !== "off" || env.CONNECTION_CEILING !== undefined) return undefined;
  return totalSockets(options) + 1024;
}

/** What one run is measured against, in order: "ours", then the name of each baseline asked for. */
export type TargetLabel = string;

export function targetLabels(options: Pick<LoadOptions, "baselines" | "baselineOnly">): TargetLabel[] {
  if (options.baselineOnly) return options.baselines.length > 0 ? options.baselines : ["baseline"];
  return ["ours", ...options.baselines];
}

/** The baseline a target label runs: the Node baseline is its durable variant with --baseline-durable. */
export function baselineOf(options: Pick<LoadOptions, "baselineDurable">, label: string): Baseline {
  return baselineNamed(label === "baseline" && options.baselineDurable ? "baseline-durable" : label);
}

/** The port a baseline of the run listens on. */
export function baselinePort(options: Pick<LoadOptions, "ports">, baseline: Baseline): number {
  return (options.ports[baseline.port.option] ?? baseline.port.default) + (baseline.port.offset ?? 0);
}

/** Generous upper bound on a run's length, used as the hard stop when --max-seconds is not given. */
export function estimatedSeconds(options: LoadOptions): number {
  const sockets = totalSockets(options);
  const setup = 30 + sockets / 200; // even a slow server opens 200 sockets/s
  const drain = options.deadlineMs / 1000 + 20;
  const body = options.scenario === "connect" ? options.holdSeconds : options.durationSeconds;
  const perTarget = setup + body + drain + 30;
  const targets = targetLabels(options).length;
  return Math.min(HARD_TIME_CAP_SECONDS, Math.ceil(perTarget * targets + 60));
}

export { UsageRequested };
