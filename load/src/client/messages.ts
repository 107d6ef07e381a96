import type { HistogramJSON } from "../stats/histogram";
import type { DeliveryTotals, PublishedRange } from "../stats/ledger";

/** How one client process is set up; sockets are numbered globally, this process owns index ≡ workerIndex (mod workerCount). */
export interface WorkerConfig {
  workerIndex: number;
  workerCount: number;
  /** ws:// or wss:// origin of the target, no trailing slash. */
  wsOrigin: string;
  /** Extra query parameters on every socket URL (credentials). */
  wsParams: Record<string, string>;
  /** Socket i joins rooms[i % rooms.length]. */
  rooms: string[];
  /** Loopback source addresses to spread sockets over; empty = let the OS choose. */
  sourceAddresses: string[];
  handshakeTimeoutMs: number;
  /** A message received later than ts + deadline is lost, not latency. */
  deadlineMs: number;
  /** Histogram ceiling for latencies, ms (values above share one bucket; max stays exact). */
  histogramCeilingMs: number;
  /** Sizing hint for per-client seq sets. */
  expectedMessages: number;
  pingIntervalMs: number;
  /** Acknowledge after this many unacknowledged bytes; 0 = a quarter of the welcome's window. */
  ackBytes: number;
  /** Connection attempts in flight at once in this process while opening a wave. */
  inFlight: number;
  /** Full-jitter reconnect after a close that allows it; absent = never reconnect. */
  reconnect?: { baseMs: number; maxMs: number };
  /** Fraction of clients that belong to the "slow" group (they stall when told to). */
  slowFraction: number;
  /** Exact number of slow clients among `totalSockets`, spread evenly; overrides slowFraction when >= 0. */
  slowCount: number;
  /** Sockets of the whole run (all processes), for slowCount. */
  totalSockets: number;
  /** Rooms each socket follows over a multiplexed connection (`GET /ws`); 0 = a socket per room (rooms[i % rooms.length]). */
  mux: number;
  /** Multiplexed: subscribe as soon as the connection is welcomed (else only on a `subscribe-all` command). */
  subscribeOnOpen: boolean;
  /** The multiplexed connections speak Pusher (pusher-client.ts). */
  pusher: boolean;
}

export type MainToWorker =
  | { type: "open"; waveId: number; from: number; to: number }
  | { type: "stall" }
  | { type: "resume" }
  /** Terminate every socket at once (network drop) and let clients reconnect. */
  | { type: "drop"; at: number }
  /** The server is being restarted at `at`: measure downtime from there. */
  | { type: "mark-drop"; at: number }
  | { type: "settle"; generations: Record<string, PublishedRange[]> }
  /** Multiplexed: every open connection sends all its subscribes at once (a subscribe storm). */
  | { type: "subscribe-all"; id: number }
  | { type: "close-all" };

export interface WorkerProgress {
  /** Sockets open right now. */
  open: number;
  connecting: number;
  /** Successful handshakes so far (HTTP 101), including reconnects. */
  handshakes: number;
  /** Failed connection attempts so far. */
  failures: number;
  welcomes: number;
  events: number;
  frames: number;
  bytes: number;
  closes: number;
  /** Clients that lost their socket and are waiting to reconnect. */
  reconnecting: number;
  /** Subscriptions live right now: one per open single-room socket, each subscribed room of a multiplexed connection. */
  subscriptions: number;
  /** Per room: the lowest highest-seq among clients expected to keep up (not stalled, not permanently closed). */
  lowestSeqByRoom: Record<string, number>;
  cpuUserUs: number;
  cpuSystemUs: number;
  rssBytes: number;
}

export interface GroupResult {
  clients: number;
  totals: DeliveryTotals;
  /** receive time − server `ts`, in-time first copies only. */
  latency: HistogramJSON;
  /** receive time − the publisher's send time carried in the payload (includes the HTTP request). */
  fromRequest: HistogramJSON;
}

export interface CloseRecord {
  /** Epoch ms when the client saw the close. */
  at: number;
  code: number;
  group: "fast" | "slow";
}

export interface WorkerSettled {
  groups: { fast: GroupResult; slow: GroupResult };
  /** Per message ("room\nseq"): ms from its ts to its latest in-time arrival at a fast client of this process. */
  lastArrivalMs: Record<string, number>;
  handshakeMs: HistogramJSON;
  welcomeMs: HistogramJSON;
  failures: Record<string, number>;
  closesByCode: Record<string, number>;
  /** First close seen by each client (capped), for "when were the slow ones closed". */
  closeRecords: CloseRecord[];
  reconnect: {
    attempts: number;
    failures: Record<string, number>;
    /** Per client: ms from the drop to its next welcome. */
    downtimeMs: HistogramJSON;
    /** Clients that were dropped and had not come back by settle time. */
    notBack: number;
    /** Epoch ms of the last welcome after a drop. */
    lastBackAt: number;
  };
  pongs: number;
  parseErrors: number;
  errorEvents: number;
  /** Multiplexed connections: subscribes refused by error code, and per connection, the time its rooms took to be subscribed. */
  subscribe: { subscribed: number; refusals: Record<string, number>; connectionMs: HistogramJSON };
}

/** One process's part of a subscribe storm. */
export interface SubscribeAllDone {
  id: number;
  connections: number;
  /** Subscriptions asked for, and those answered `subscribed`. */
  asked: number;
  subscribed: number;
  /** Refused subscribes by error code (each attempt; a rate-limited one is tried again). */
  refusals: Record<string, number>;
  /** Connections that closed before all their rooms were subscribed. */
  closed: number;
  /** Epoch ms of the last `subscribed` event of the storm in this process (0: none). */
  lastAt: number;
}

export interface WaveDone {
  waveId: number;
  attempted: number;
  ok: number;
  failures: Record<string, number>;
  /** Welcome seq per room (lowest seen), the seq the measurement starts after. */
  welcomeSeqByRoom: Record<string, number>;
}

export type WorkerToMain =
  | { type: "ready" }
  | { type: "progress"; progress: WorkerProgress }
  | { type: "wave-done"; wave: WaveDone }
  | { type: "settled"; settled: WorkerSettled }
  | { type: "subscribed-all"; done: SubscribeAllDone }
  | { type: "closed" }
  | { type: "fatal"; message: string };

/**
 * Deterministic, evenly spread choice of the slow group (same answer in every
 * process). With `count` >= 0, exactly `count` of the `total` indices are slow
 * (a hashed fraction only approximates its share: 0.0196 of 1,020 picks 17).
 */
export function isSlowClient(index: number, fraction: number, count = -1, total = 0): boolean {
  if (count >= 0 && total > 0) return Math.floor(((index + 1) * count) / total) > Math.floor((index * count) / total);
  if (fraction <= 0) return false;
  if (fraction >= 1) return true;
  const hashed = Math.imul(index + 1, 2654435761) >>> 0;
  return hashed % 10_000 < Math.round(fraction * 10_000);
}
