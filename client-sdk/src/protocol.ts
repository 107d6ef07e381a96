/**
 * The wire protocol: every event type, close code and default limit that the
 * worker, the room, the client SDK and the load tool agree on. Nothing else in
 * the project defines a frame shape or a close code; import them from here.
 *
 * Human-readable version: docs/protocol.md.
 *
 * This module has no runtime dependencies so the browser SDK can bundle it.
 */

export const PROTOCOL_VERSION = 1;

// ---------------------------------------------------------------------------
// Heartbeat: answered by the runtime itself (setWebSocketAutoResponse), so a
// ping never wakes a hibernated room.
// ---------------------------------------------------------------------------

export const PING = "ping";
export const PONG = "pong";

// ---------------------------------------------------------------------------
// Subprotocols. Browsers cannot set headers on a WebSocket but can offer
// subprotocols: `new WebSocket(url, [SUBPROTOCOL, TOKEN_SUBPROTOCOL_PREFIX + jwt])`
// carries a subscribe token outside the URL; the server selects SUBPROTOCOL.
// ---------------------------------------------------------------------------

/** Subprotocol clients offer and the server selects (docs/security.md). */
export const SUBPROTOCOL = "fanout.v1";
/** Prefix of the offered subprotocol that carries a subscribe token: `token.<jwt>`. */
export const TOKEN_SUBPROTOCOL_PREFIX = "token.";

// ---------------------------------------------------------------------------
// Server -> client events. A frame is JSON text holding one event object or a
// JSON array of event objects (a coalesced batch).
// ---------------------------------------------------------------------------

/** First event on every new socket: where the room stands right now. */
export interface WelcomeEvent {
  type: "welcome";
  room: string;
  /**
   * Latest seq published in the room when the socket was accepted. A socket
   * opened with `since` first receives every message after `since` up to this
   * one (from history), then live messages.
   */
  seq: number;
  /** Identity of the room's history; a different epoch means seqs restarted. */
  epoch: string;
  /** Unacknowledged bytes the room sends a socket before it waits for an ack. */
  window: number;
  /**
   * The socket's budget for client frames that are not flow control (0 = no
   * limit): publishes, and acks that release nothing. Over it the room closes
   * with 4009. Heartbeats and acks that release a frame are free.
   */
  rate: { perSecond: number; burst: number };
}

/** One published message. `seq` grows by exactly 1 per message within a room. */
export interface MessageEvent<T = unknown> {
  type: "message";
  seq: number;
  data: T;
  /** Publish time, epoch milliseconds (server clock). */
  ts: number;
  /**
   * A random number that proves receipt: an ack names a message by `seq`
   * and echoes its `tag`, which a client only knows by having read it.
   */
  tag: number;
}

/**
 * Continuity was lost: messages `from`..`to` (inclusive) will never be
 * delivered to this socket; delivery continues with `to + 1`. `reason`:
 * - "history": they aged out of the room's bounded history before this socket
 *   read them;
 * - "epoch": the room's history itself was lost (the epoch changed); `from`/`to`
 *   span the seqs the client asked for, and the client should reload its state.
 */
export interface LostEvent {
  type: "lost";
  reason: "history" | "epoch";
  from: number;
  to: number;
}

/** A member of a room: one identity (a token's `sub`), however many sockets it has open. */
export interface PresenceMember {
  id: string;
  /** Member data from the token's `info` claim (signed by the issuer), or from the socket's URL in open mode. */
  info?: unknown;
  /**
   * Sockets this member had open in the room when the event was sent: events
   * do not follow a member's further tabs (so a reload costs nobody else an
   * event), a `sync` and `GET /rooms/{room}/presence` are current.
   */
  connections: number;
  /** False when the member named itself (open mode: no token vouches for the name). */
  verified: boolean;
}

/**
 * Who is in the room. Presence events are not room messages: they have no
 * `seq`, are not in history, and a socket that reconnects gets a fresh `sync`.
 * - `sync`: the whole picture, on connect and whenever a socket fell behind on
 *   presence: `members` when the room has at most PRESENCE_MAX_MEMBERS members,
 *   only `count` above that;
 * - `join` / `leave`: one member came or went (a member leaves only after
 *   PRESENCE_LEAVE_DELAY_MS without any socket, so a reload is not a leave);
 * - `count`: above PRESENCE_MAX_MEMBERS, the number of members, at most once per
 *   PRESENCE_COUNT_INTERVAL_MS and only when it changed.
 */
export type PresenceEvent = (
  | { type: "presence"; action: "sync"; count: number; members?: PresenceMember[] }
  | { type: "presence"; action: "join"; count: number; member: PresenceMember }
  | { type: "presence"; action: "leave"; count: number; member: { id: string } }
  | { type: "presence"; action: "count"; count: number }
) & {
  /**
   * Receipt tag, as on messages: presence counts against the socket's window,
   * so acknowledge it with `{"type":"ack","seq":<the last seq you read>,"tag":<this tag>}`
   * (an ack for any later message also covers it).
   */
  tag: number;
};

/** Answer to a socket `publish` frame. */
export interface PublishedEvent {
  type: "published";
  /** The client's correlation id, echoed back. */
  id?: string;
  seq: number;
}

/**
 * An event of the application's own, sent to one socket by the room's server
 * code (a hook of a `Room` subclass: docs/hooks.md). Its `type` starts with
 * `x-`, so it can never be mistaken for an event of this protocol; it has no
 * `seq`, is not in history and is not acknowledged.
 */
export interface CustomServerEvent {
  type: CustomType;
  [field: string]: unknown;
}

/** A client frame was refused without closing the socket. */
export interface ErrorEvent {
  type: "error";
  code: ErrorCode;
  message: string;
  /** The client's correlation id when the refused frame carried one. */
  id?: string;
}

export type ServerEvent = WelcomeEvent | MessageEvent | LostEvent | PresenceEvent | PublishedEvent | ErrorEvent | CustomServerEvent;

export type ServerEventType = ServerEvent["type"];

// ---------------------------------------------------------------------------
// Client -> server frames: JSON objects with a `type` (besides the text "ping").
// ---------------------------------------------------------------------------

/**
 * "I have read up to message `seq`, whose tag was `tag`": releases the window
 * bytes of every frame sent to this socket whose messages are all <= `seq`.
 * Name the last message of a frame you received (the highest seq so far).
 */
export interface AckFrame {
  type: "ack";
  seq: number;
  tag: number;
}

/** Publish `data` into the room from the socket (when the room allows it). */
export interface PublishFrame {
  type: "publish";
  data: unknown;
  id?: string;
}

/**
 * A frame of the application's own (`{"type":"x-...", ...}`), handled by the
 * room's `onClientFrame` hook. A room without that hook closes the socket
 * with 4000, as for any unknown type. It costs a frame token, like a publish.
 */
export interface CustomClientFrame {
  type: CustomType;
  /** Echoed in the `error` event when the room's hook fails on this frame. */
  id?: string;
  [field: string]: unknown;
}

/** Type of an application frame or event: `x-` then 1-64 letters, digits or `. _ : -`. */
export type CustomType = `x-${string}`;

/** What a custom `type` must look like. */
export const CUSTOM_TYPE_PATTERN = /^x-[A-Za-z0-9._:-]{1,64}$/;

/** Whether `type` names an application frame or event (CUSTOM_TYPE_PATTERN). */
export function isCustomType(type: unknown): type is CustomType {
  return typeof type === "string" && CUSTOM_TYPE_PATTERN.test(type);
}

export type ClientFrame = AckFrame | PublishFrame | CustomClientFrame;

// ---------------------------------------------------------------------------
// Close codes. `reconnect` says what a client must do after it: true means
// reconnect with backoff and resume with `since`; false means stop (the same
// request would be refused again).
// ---------------------------------------------------------------------------

export const CloseCode = {
  /** The client or server ended the session on purpose. */
  NORMAL: 1000,
  /** The server is going away (deploy, shutdown of the object). */
  GOING_AWAY: 1001,
  /** A frame was larger than the room accepts. */
  MESSAGE_TOO_BIG: 1009,
  /** Unexpected server error; safe to retry. */
  INTERNAL_ERROR: 1011,
  /** Service restart (local server shutdown, deploy). Reconnect and resume. */
  SERVICE_RESTART: 1012,
  /** Temporary overload. */
  TRY_AGAIN_LATER: 1013,
  /** The client sent a frame that is not valid protocol (bad JSON, unknown type, bad field, an ack for a message it was not sent). */
  BAD_FRAME: 4000,
  /** The token is missing, invalid or expired. */
  UNAUTHORIZED: 4001,
  /** The token does not allow this room or this action. */
  FORBIDDEN: 4003,
  /** The socket fell behind and acknowledged nothing for SLOW_GRACE_MS. Reconnect and resume. */
  SLOW_CONSUMER: 4008,
  /** The client sent frames faster than its rate limit. */
  RATE_LIMITED: 4009,
  /** No heartbeat or frame from the client within the idle timeout. */
  IDLE_TIMEOUT: 4010,
} as const;

export type CloseCodeName = keyof typeof CloseCode;
export type CloseCodeValue = (typeof CloseCode)[CloseCodeName];

export interface CloseCodeInfo {
  name: CloseCodeName;
  /** Whether a client should reconnect (with backoff, resuming with `since`). */
  reconnect: boolean;
  description: string;
}

/** The one table that decides reconnect versus stop; docs/protocol.md mirrors it. */
export const CLOSE_CODES: Readonly<Record<CloseCodeValue, CloseCodeInfo>> = {
  1000: { name: "NORMAL", reconnect: false, description: "closed on purpose" },
  1001: { name: "GOING_AWAY", reconnect: true, description: "server going away" },
  1009: { name: "MESSAGE_TOO_BIG", reconnect: false, description: "client frame over the size limit" },
  1011: { name: "INTERNAL_ERROR", reconnect: true, description: "unexpected server error" },
  1012: { name: "SERVICE_RESTART", reconnect: true, description: "service restart; resume with since" },
  1013: { name: "TRY_AGAIN_LATER", reconnect: true, description: "temporary overload" },
  4000: { name: "BAD_FRAME", reconnect: false, description: "invalid client frame" },
  4001: { name: "UNAUTHORIZED", reconnect: false, description: "missing, invalid or expired token" },
  4003: { name: "FORBIDDEN", reconnect: false, description: "token does not allow this" },
  4008: { name: "SLOW_CONSUMER", reconnect: true, description: "behind with no acknowledged progress for too long; resume with since" },
  4009: { name: "RATE_LIMITED", reconnect: true, description: "client frames over the rate limit" },
  4010: { name: "IDLE_TIMEOUT", reconnect: true, description: "no heartbeat within the idle timeout" },
};

/**
 * Whether a client should reconnect after a close with `code`. Codes not in the
 * table (1005/1006 abnormal closures, network failures, unknown codes) are
 * treated as transient: reconnect.
 */
export function shouldReconnect(code: number): boolean {
  const info = (CLOSE_CODES as Readonly<Record<number, CloseCodeInfo | undefined>>)[code];
  return info ? info.reconnect : true;
}

// ---------------------------------------------------------------------------
// Error codes carried in HTTP JSON bodies ({"error": code, "message": ...})
// and in `error` events.
// ---------------------------------------------------------------------------

export type ErrorCode =
  | "bad_room"
  | "bad_request"
  | "bad_json"
  | "bad_frame"
  | "too_large"
  | "upgrade_required"
  | "unauthorized"
  | "forbidden"
  | "not_found"
  | "method_not_allowed"
  | "room_full"
  | "over_capacity"
  | "rate_limited"
  | "internal";

export interface ErrorBody {
  error: ErrorCode;
  message: string;
}

// ---------------------------------------------------------------------------
// Timing a client needs before the room has said anything. Every other limit
// is announced in the welcome or is the server's own business
// (worker/settings.ts), so it stays out of the browser bundle.
// ---------------------------------------------------------------------------

/** Interval at which clients should send "ping"; the room closes silent sockets after IDLE_TIMEOUT_SECONDS (90 by default). */
export const PING_INTERVAL_SECONDS = 25;

/** Room names: 1-64 characters from a URL-safe set. */
export const ROOM_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:~-]{0,63}$/;

export function isValidRoomName(name: string): boolean {
  return ROOM_NAME_PATTERN.test(name);
}

// ---------------------------------------------------------------------------
// Parsing. Both directions share these so a malformed frame gets the same
// answer everywhere.
// ---------------------------------------------------------------------------

export type ParseResult<T> = { ok: true; value: T } | { ok: false; error: string };

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function isSeq(v: unknown): v is number {
  return typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
}

/** Largest message tag: tags are unsigned 32-bit integers. */
export const MAX_TAG = 0xffff_ffff;

function isTag(v: unknown): v is number {
  return typeof v === "number" && Number.isInteger(v) && v >= 0 && v <= MAX_TAG;
}

/** Parses one client frame (anything but the heartbeat text). */
export function parseClientFrame(text: string): ParseResult<ClientFrame> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { ok: false, error: "frame is not JSON" };
  }
  if (!isObject(value)) return { ok: false, error: "frame must be a JSON object" };
  switch (value.type) {
    case "ack":
      if (!isSeq(value.seq)) return { ok: false, error: "ack.seq must be a non-negative integer" };
      if (!isTag(value.tag)) return { ok: false, error: "ack.tag must be the tag of the message named by seq" };
      return { ok: true, value: { type: "ack", seq: value.seq, tag: value.tag } };
    case "publish": {
      if (!("data" in value) || value.data === undefined) return { ok: false, error: "publish.data is required" };
      if (value.id !== undefined && (typeof value.id !== "string" || value.id.length > 128)) {
        return { ok: false, error: "publish.id must be a string of at most 128 characters" };
      }
      const frame: PublishFrame = { type: "publish", data: value.data };
      if (typeof value.id === "string") frame.id = value.id;
      return { ok: true, value: frame };
    }
    default:
      if (isCustomType(value.type)) {
        if (value.id !== undefined && (typeof value.id !== "string" || value.id.length > 128)) {
          return { ok: false, error: "id must be a string of at most 128 characters" };
        }
        return { ok: true, value: value as CustomClientFrame };
      }
      return { ok: false, error: `unknown frame type ${JSON.stringify(String(value.type))}` };
  }
}

/** Parses one server frame into its events (a frame is one event or an array of them). */
export function parseServerFrame(text: string): ParseResult<ServerEvent[]> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { ok: false, error: "frame is not JSON" };
  }
  const items = Array.isArray(value) ? value : [value];
  for (const item of items) {
    if (!isObject(item) || typeof item.type !== "string") {
      return { ok: false, error: "every event must be an object with a type" };
    }
  }
  return { ok: true, value: items as ServerEvent[] };
}

/** A room's cumulative counters: they survive hibernation and restarts and only grow. */
export interface RoomCounterValues {
  /** Messages published into the room. */
  published: number;
  /** Frames sent to sockets (one frame may carry several messages). */
  framesSent: number;
  bytesSent: number;
  /** Messages delivered, counted per socket. */
  deliveries: number;
  /** Frames sent from history to sockets catching up (behind, or resuming with `since`); part of framesSent. */
  catchUpFrames: number;
  /** Rows of history read to send those frames. */
  historyRowsRead: number;
  /** Rows of history written (a row holds the messages of one live frame). */
  historyRowsWritten: number;
  /** Messages reported lost to sockets (`lost` events with reason "history"), counted per socket. */
  lostMessages: number;
  /** Sockets closed as slow consumers (4008): behind with no acknowledged progress for SLOW_GRACE_MS. */
  kicks: number;
  /** Presence events sent, counted per socket. */
  presenceEvents: number;
  /** Sockets refused or closed by the room, by reason (room_full, rate_limited, bad_frame, too_big, idle_timeout, token_expired). */
  refusals: Record<string, number>;
}

/** Service-wide sums behind `GET /metrics`: every room's counters plus the worker's own. */
export interface ServiceTotals extends RoomCounterValues {
  /** POST /broadcast requests accepted. */
  broadcasts: number;
}

/** Body of `GET /rooms/{room}`. */
export interface RoomStats extends RoomCounterValues {
  room: string | null;
  epoch: string;
  connections: number;
  /** Members in the room's presence (sockets with an identity, counted once per identity). */
  members: number;
  seq: number;
  historyOldest: number | null;
  /** Sockets catching up from history right now (they receive no live frames until they are level). */
  behind: number;
  /** Sum and maximum of unacknowledged bytes over the sockets. */
  windowBytesInFlight: number;
  windowBytesMax: number;
  windowCap: number;
  /** When the current instance of the room started (it restarts after hibernation). */
  instanceStartedAt: number;
  /**
   * A sharded room (docs/sharded-rooms.md): the sockets on the root itself; `connections`,
   * `behind` and the window figures above are totals over the root and every leaf.
   */
  rootConnections?: number;
  /** A sharded room: each leaf object, asked when the stats were read. */
  leaves?: RoomLeafStats[];
  /** A sharded room: requests its root received since its instance started, by kind. */
  rootRequests?: RootRequests;
  /** A sharded room: pushes its root sent to leaves since its instance started. */
  leafPushes?: number;
}

/** What the root of a sharded room is asked (`RoomStats.rootRequests`). */
export interface RootRequests {
  /** Upgrades it accepted itself. */
  upgrades: number;
  /** Upgrades answered with a placement on leaves. */
  placements: number;
  publishes: number;
  /** Leaves asking where the room stands, reporting between pushes, fetching history. */
  leafSyncs: number;
  leafReports: number;
  leafFetches: number;
  /** Stats and presence reads. */
  reads: number;
}

/** One leaf object of a sharded room, in `GET /rooms/{room}`. */
export interface RoomLeafStats {
  index: number;
  connections: number;
  /** Members with a socket on this leaf (a member with tabs on two leaves counts on both; the room's `members` counts it once). */
  members: number;
  behind: number;
  /** The leaf is level with the room up to this seq. */
  seq: number;
  windowBytesInFlight: number;
  windowBytesMax: number;
  /** Messages and bytes the leaf keeps for its sockets' resumes and catch-up. */
  ringMessages: number;
  ringBytes: number;
  instanceStartedAt: number;
  /** This leaf instance's counters (they are also in the room's). */
  counters: RoomCounterValues;
  /** False when the leaf did not answer in time: its figures are then the root's last report. */
  reachable: boolean;
}

/** One live room in a `GET /rooms` answer. */
export interface RoomListEntry {
  room: string;
  /** Sockets as of the room's last report (at most one heartbeat interval old). */
  connections: number;
  /** Presence members as of the same report. */
  members: number;
}

/** Body of a `GET /rooms` answer. */
export interface RoomList {
  /** Live rooms in name order. */
  rooms: RoomListEntry[];
  /** Pass as `cursor` for the next page; null on the last page. */
  cursor: string | null;
}

/** Body of a `POST /broadcast` answer. */
export interface BroadcastResult {
  /** The key every room deduped on: the request's Idempotency-Key, or one generated for it. */
  idempotencyKey: string;
  /** Rooms that hold the message (delivered now, or by an earlier request with the same key). */
  rooms: number;
  /** Sockets the message was sent to by this request. */
  sockets: number;
  /** Rooms that already had this key and sent nothing again. */
  duplicates: number;
  /** True when every room reached already had the key: a repeated request. */
  duplicate: boolean;
  /** Rooms whose own beforePublish hook refused the message (they hold nothing; not retried). */
  refused: number;
  /** Rooms that still failed after every retry (at most 100 names; see failedCount). */
  failed: string[];
  failedCount: number;
  /** Shards that could not be reached: their rooms are in `failed` (explicit lists) or unknown (prefix). */
  failedShards: number[];
}

/** URL path of a room's WebSocket endpoint. */
export function roomSocketPath(room: string): string {
  return `/rooms/${encodeURIComponent(room)}/ws`;
}

/** URL path of a room's HTTP publish endpoint. */
export function roomPublishPath(room: string): string {
  return `/rooms/${encodeURIComponent(room)}/publish`;
}
