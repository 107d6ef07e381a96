/**
 * The multiplexed connection (`GET /ws`): one WebSocket that follows many
 * rooms. The client subscribes to rooms by name and every event the server
 * sends names its room; each room's messages keep the single-room guarantees
 * (in order, once, resumed with `since` and `epoch`), and one window covers
 * the connection across all its rooms. docs/protocol.md, "Many rooms over one
 * connection", is the human-readable version.
 */
import type { ErrorCode } from "./errors.js";
import type { CustomType, LostEvent, PresenceEvent, PublishedEvent, ServerError, ServerMessage } from "./events.js";
import { frameObject, isIdempotencyKey, MAX_FRAME_ID_LENGTH, MAX_TAG, type ParseResult } from "./frames.js";
import { isValidRoomName } from "./rooms.js";

// ---------------------------------------------------------------------------
// Server -> client
// ---------------------------------------------------------------------------

/** First event on a multiplexed connection: the connection's budgets; rooms follow with `subscribed`. */
export interface ConnectionWelcomeEvent {
  type: "welcome";
  /** Unacknowledged bytes the server sends this connection, over all its rooms, before it waits for an ack. */
  window: number;
  /** The connection's budget for client frames that are not flow control (0 = no limit); over it: close 4009. */
  rate: { perSecond: number; burst: number };
  /** Largest message data, bytes of its JSON text (UTF-8); a publish over it is refused with `too_large`. */
  maxMessageBytes: number;
  /** Rooms the connection may follow at once (MAX_ROOMS_PER_CONNECTION). */
  maxRooms: number;
  /** The connection's budget for subscribes: a refused one gets `error` `rate_limited` and the connection stays. */
  subscribeRate: { perSecond: number; burst: number };
}

/**
 * A subscribe was accepted: where the room stands. Then come a `lost` event
 * (when the subscribe's epoch is not the room's), the room's presence `sync`,
 * every message after `since` (for a subscribe that asked for it), then live
 * messages.
 */
export interface SubscribedEvent {
  type: "subscribed";
  room: string;
  seq: number;
  epoch: string;
}

/**
 * The connection no longer follows `room`: it asked (`unsubscribe`), or the
 * server ended the subscription (`code` says why: `forbidden` when a token
 * refresh no longer grants the room). Nothing more of the room arrives.
 */
export interface UnsubscribedEvent {
  type: "unsubscribed";
  room: string;
  code?: ErrorCode;
  reason?: string;
}

/** Answer to an `auth` frame: the connection now holds the new token's grants. */
export interface AuthorizedEvent {
  type: "authorized";
  /** When the new token expires (seconds since the epoch); the connection is closed with 4001 then. */
  exp: number;
}

/** An event of one room on a multiplexed connection: the single-room event with the room's name. */
export type RoomScoped<E> = E & { room: string };

/**
 * Every event a multiplexed connection receives. Room events are the
 * single-room ones with `room`; a refused subscribe, ack or publish is an
 * `error` with `room` (and the frame's `id` when it had one), and the
 * connection stays open.
 */
export type MultiplexEvent =
  | ConnectionWelcomeEvent
  | SubscribedEvent
  | UnsubscribedEvent
  | AuthorizedEvent
  | RoomScoped<ServerMessage>
  | RoomScoped<LostEvent>
  | RoomScoped<PresenceEvent>
  | RoomScoped<PublishedEvent>
  | (ServerError & { room?: string })
  | { type: CustomType; room?: string; [field: string]: unknown };

// ---------------------------------------------------------------------------
// Client -> server
// ---------------------------------------------------------------------------

/**
 * Follow `room`, from now on or (with `since`) after a seq read earlier, in
 * the history named `epoch`. `room` is the string the client sent: one that
 * is not a room name is refused for that room (`error` `bad_room`), and the
 * connection stays, as for any refused subscribe.
 */
export interface SubscribeFrame {
  type: "subscribe";
  room: string;
  since?: number;
  epoch?: string;
  id?: string;
}

/** Stop following `room`; answered `unsubscribed`. */
export interface UnsubscribeFrame {
  type: "unsubscribe";
  room: string;
  id?: string;
}

/** "I have read message `seq` of `room`, whose tag was `tag`" (or a presence event of the room): as on a room's socket. */
export interface RoomAckFrame {
  type: "ack";
  room: string;
  seq: number;
  tag: number;
}

/** Publish into `room` (a subscribed room the connection's token lets it publish into). */
export interface RoomPublishFrame {
  type: "publish";
  room: string;
  data: unknown;
  id?: string;
  /** An idempotency key, as a single-room publish frame's `key` (docs/history.md#idempotent-publishes). */
  key?: string;
}

/** A fresh token for the connection: its grants replace the old ones without reconnecting. */
export interface AuthFrame {
  type: "auth";
  token: string;
}

export type MultiplexClientFrame = SubscribeFrame | UnsubscribeFrame | RoomAckFrame | RoomPublishFrame | AuthFrame;

/** Longest token an `auth` frame may carry. */
export const MAX_AUTH_TOKEN_LENGTH = 8192;

function isSeq(v: unknown): v is number {
  return typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
}

const EPOCH = /^[A-Za-z0-9-]{1,64}$/;

/**
 * Longest `room` of a refused subscribe that its `error` repeats; a longer
 * string is not repeated (the error still carries the subscribe's `id`).
 */
export const MAX_ECHOED_ROOM_LENGTH = 256;

/** The room a frame names: a room name, except for a subscribe, whose room may be any string (refused by the server). */
function roomOf(value: Record<string, unknown>): string | null {
  if (typeof value.room !== "string") return null;
  return value.type === "subscribe" || isValidRoomName(value.room) ? value.room : null;
}

function idProblem(value: Record<string, unknown>): string | null {
  return value.id === undefined || (typeof value.id === "string" && value.id.length <= MAX_FRAME_ID_LENGTH)
    ? null
    : `id must be a string of at most ${MAX_FRAME_ID_LENGTH} characters`;
}

/** Parses one frame of a multiplexed connection (anything but the heartbeat text). */
export function parseMultiplexFrame(text: string): ParseResult<MultiplexClientFrame> {
  const object = frameObject(text);
  if (!object.ok) return object;
  const value = object.value;
  if (value.type === "auth") {
    if (typeof value.token !== "string" || value.token === "" || value.token.length > MAX_AUTH_TOKEN_LENGTH) {
      return { ok: false, error: "auth.token must be a token" };
    }
    return { ok: true, value: { type: "auth", token: value.token } };
  }
  const room = roomOf(value);
  if (room === null) return { ok: false, error: `${String(value.type)}.room must be a room name${value.type === "subscribe" ? " (a string)" : ""}` };
  const badId = idProblem(value);
  if (badId) return { ok: false, error: badId };
  const id = typeof value.id === "string" ? { id: value.id } : {};
  switch (value.type) {
    case "subscribe": {
      const frame: SubscribeFrame = { type: "subscribe", room, ...id };
      if (value.since !== undefined) {
        if (!isSeq(value.since) || value.since > 999_999_999_999_999) return { ok: false, error: "subscribe.since must be a non-negative integer" };
        frame.since = value.since;
      }
      if (value.epoch !== undefined) {
        if (typeof value.epoch !== "string" || !EPOCH.test(value.epoch)) return { ok: false, error: "subscribe.epoch must be the epoch of a subscribed event" };
        frame.epoch = value.epoch;
      }
      return { ok: true, value: frame };
    }
    case "unsubscribe":
      return { ok: true, value: { type: "unsubscribe", room, ...id } };
    case "ack":
      if (!isSeq(value.seq)) return { ok: false, error: "ack.seq must be a non-negative integer" };
      if (typeof value.tag !== "number" || !Number.isInteger(value.tag) || value.tag < 0 || value.tag > MAX_TAG) {
        return { ok: false, error: "ack.tag must be the tag of the message named by seq" };
      }
      return { ok: true, value: { type: "ack", room, seq: value.seq, tag: value.tag } };
    case "publish": {
      if (!("data" in value) || value.data === undefined) return { ok: false, error: "publish.data is required" };
      if (value.key !== undefined && !isIdempotencyKey(value.key)) return { ok: false, error: "publish.key must be 1-128 visible ASCII characters" };
      const frame: RoomPublishFrame = { type: "publish", room, data: value.data, ...id };
      if (typeof value.key === "string") frame.key = value.key;
      return { ok: true, value: frame };
    }
    default:
      return { ok: false, error: `unknown frame type ${JSON.stringify(String(value.type))}` };
  }
}

/** URL path of the multiplexed connection. */
export const MULTIPLEX_PATH = "/ws";
