/**
 * The Pusher Channels protocol (version 7), as the service's second front
 * door speaks it: stock Pusher clients (pusher-js, Laravel Echo,
 * pusher-websocket-swift and -java) connect to `/app/{key}` and Pusher's
 * server SDKs call `/apps/{id}/...`. This module is its one source of truth:
 * frames both ways, close codes and what each makes a client do, channel
 * names and the room each maps to, the limits Pusher documents, the HTTP
 * API's bodies and the webhooks in Pusher's format. The
 * worker, the objects that hold Pusher connections, the load tool and the
 * tests import it; it imports nothing but the room-name rules.
 *
 * Human-readable version: docs/pusher.md.
 */
import type { ParseResult } from "./frames.js";

/** The protocol version the front door speaks (`?protocol=7`). */
export const PUSHER_PROTOCOL = 7;
/** Path of a Pusher connection: `/app/{key}`. */
export const PUSHER_SOCKET_PREFIX = "/app/";
/**
 * Seconds of silence after which a client pings (announced in
 * `pusher:connection_established`; pusher-js takes the smaller of this and
 * its own 120 s). The object that holds the connection answers the ping
 * without waking (a runtime auto-response), so a longer timeout saves nothing.
 */
export const PUSHER_ACTIVITY_TIMEOUT_SECONDS = 120;

/** What a client does after a close, as pusher-js decides it from the code (`getCloseAction`). */
export type PusherCloseAction = "stop" | "backoff" | "reconnect";

/**
 * Close codes of a Pusher connection, by Pusher's ranges: 4000-4099 the
 * client stops (the same request would be refused again), 4100-4199 it
 * reconnects after backing off, 4200-4299 it reconnects at once. A restart,
 * a deploy and a "go elsewhere" are always 42xx: a client told 40xx there
 * would never come back.
 */
export const PusherCloseCode = {
  /** The app key is not one this service serves, or the front door is off. */
  APP_NOT_FOUND: 4001,
  /** No `protocol` in the URL. */
  NO_PROTOCOL: 4008,
  /** A `protocol` that is not a version number. */
  BAD_PROTOCOL: 4006,
  /** A protocol version other than 7. */
  UNSUPPORTED_PROTOCOL: 4007,
  /**
   * The client is not speaking the protocol as a client library does (a binary frame, a frame
   * far over the size limit, a pong for a ping the server never sent), or its connections were
   * terminated by the app's server (`terminate_connections`).
   */
  UNAUTHORIZED: 4009,
  /** Over capacity: the server is full, the client sent frames over its rate, or it read too slowly. Back off. */
  OVER_CAPACITY: 4100,
  /** Reconnect now: a restart, a deploy, a moved connection, an internal error. */
  RECONNECT: 4200,
  /** No ping or frame from the client within the activity timeout and its grace. */
  PONG_TIMEOUT: 4201,
} as const;

export type PusherCloseCodeValue = (typeof PusherCloseCode)[keyof typeof PusherCloseCode];

/** Error code of a `pusher:error` for a client event refused for its rate (the connection stays). */
export const PUSHER_CLIENT_EVENT_REJECTED = 4301;

/** What a client does after a close with `code`, by Pusher's ranges (as pusher-js decides). */
export function pusherCloseAction(code: number): PusherCloseAction | null {
  if (code < 4000) return code >= 1002 && code <= 1004 ? "backoff" : null;
  if (code < 4100) return "stop";
  if (code < 4200) return "backoff";
  if (code < 4300) return "reconnect";
  return "stop";
}

// ---------------------------------------------------------------------------
// Frames
// ---------------------------------------------------------------------------

/** A Pusher event as it travels in either direction. Server-sent `data` is a JSON string (double-encoded). */
export interface PusherEvent {
  event: string;
  channel?: string;
  data?: unknown;
  /** On a client event of a presence channel: the sender's user id. */
  user_id?: string;
}

/**
 * A server event's text: `data` is encoded as JSON text inside the frame's
 * JSON (Pusher's double encoding), unless it already is a string, which
 * travels as it is.
 */
export function pusherFrame(event: string, data: unknown, channel?: string): string {
  const dataText = typeof data === "string" ? data : JSON.stringify(data ?? {});
  return channel === undefined
    ? `{"event":${JSON.stringify(event)},"data":${JSON.stringify(dataText)}}`
    : `{"event":${JSON.stringify(event)},"channel":${JSON.stringify(channel)},"data":${JSON.stringify(dataText)}}`;
}

/** The exact ping pusher-js sends after a quiet activity timeout; the runtime answers it with PUSHER_PONG. */
export const PUSHER_PING = '{"event":"pusher:ping","data":{}}';
export const PUSHER_PONG = '{"event":"pusher:pong","data":{}}';

/** `pusher:subscribe`: `auth` for private and presence channels, `channel_data` (the exact signed string) for presence. */
export interface PusherSubscribe {
  event: "pusher:subscribe";
  channel: string;
  auth?: string;
  channelData?: string;
}

export interface PusherUnsubscribe {
  event: "pusher:unsubscribe";
  channel: string;
}

/** `pusher:signin`: `auth` signs `{socket_id}::user::{user_data}`. */
export interface PusherSignin {
  event: "pusher:signin";
  auth: string;
  userData: string;
}

/** A client event (`client-*`) into a private or presence channel; `data` is relayed to the others as the client sent it. */
export interface PusherClientEvent {
  event: `client-${string}`;
  channel: string;
  data: unknown;
}

export type PusherClientFrame =
  | PusherSubscribe
  | PusherUnsubscribe
  | PusherSignin
  | PusherClientEvent
  | { event: "pusher:ping" }
  | { event: "pusher:pong" };

function dataObject(value: unknown): Record<string, unknown> | null {
  // pusher-js sends data as an object; other clients send it double-encoded.
  if (typeof value === "string") {
    try {
      value = JSON.parse(value) as unknown;
    } catch {
      return null;
    }
  }
  return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
}

/** Parses one client frame; what the front door does not know is an error it answers with `pusher:error`. */
export function parsePusherClientFrame(text: string): ParseResult<PusherClientFrame> {
  let value: unknown;
  try {
    value = JSON.parse(text) as unknown;
  } catch {
    return { ok: false, error: "a frame must be a JSON object with an event" };
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return { ok: false, error: "a frame must be a JSON object with an event" };
  const frame = value as Record<string, unknown>;
  const event = frame.event;
  if (typeof event !== "string" || event === "") return { ok: false, error: "a frame must name its event" };
  switch (event) {
    case "pusher:ping":
    case "pusher:pong":
      return { ok: true, value: { event } };
    case "pusher:subscribe":
    case "pusher:unsubscribe": {
      const data = dataObject(frame.data);
      if (!data || typeof data.channel !== "string") return { ok: false, error: `${event} needs data.channel` };
      if (event === "pusher:unsubscribe") return { ok: true, value: { event, channel: data.channel } };
      const subscribe: PusherSubscribe = { event, channel: data.channel };
      if (data.auth !== undefined) {
        if (typeof data.auth !== "string") return { ok: false, error: "pusher:subscribe data.auth must be a string" };
        subscribe.auth = data.auth;
      }
      if (data.channel_data !== undefined) {
        if (typeof data.channel_data !== "string") return { ok: false, error: "pusher:subscribe data.channel_data must be a string" };
        subscribe.channelData = data.channel_data;
      }
      return { ok: true, value: subscribe };
    }
    case "pusher:signin": {
      const data = dataObject(frame.data);
      if (!data || typeof data.auth !== "string" || typeof data.user_data !== "string") return { ok: false, error: "pusher:signin needs data.auth and data.user_data" };
      return { ok: true, value: { event, auth: data.auth, userData: data.user_data } };
    }
    default:
      if (event.startsWith("client-")) {
        if (typeof frame.channel !== "string") return { ok: false, error: "a client event names its channel" };
        if (event.length > PUSHER_LIMITS.maxEventNameLength) return { ok: false, error: `event names are at most ${PUSHER_LIMITS.maxEventNameLength} characters` };
        return { ok: true, value: { event: event as `client-${string}`, channel: frame.channel, data: frame.data ?? null } };
      }
      return { ok: false, error: `unknown event ${JSON.stringify(event.slice(0, 64))}` };
  }
}

/** Socket ids: two unsigned integers joined by a dot (the server SDKs refuse to sign anything else). */
export const SOCKET_ID_PATTERN = /^\d{1,20}\.\d{1,20}$/;

// ---------------------------------------------------------------------------
// Limits, as Pusher documents them
// ---------------------------------------------------------------------------

export const PUSHER_LIMITS = {
  /** Members of one presence channel; a subscribe past it gets a `pusher:subscription_error` with status 4100. */
  maxPresenceMembers: 100,
  /** A presence member's or signed-in user's id. */
  maxUserIdLength: 128,
  /** A presence member's `user_info`, bytes of its JSON. */
  maxUserInfoBytes: 1024,
  /** An event name. */
  maxEventNameLength: 200,
  /** An event's data, bytes (HTTP events and client events). */
  maxEventDataBytes: 10 * 1024,
  /** Client events one connection may send per second; past it they are refused with `pusher:error` 4301. */
  clientEventsPerSecond: 10,
  /** Events in one `batch_events` request. */
  maxBatchEvents: 10,
  /** Channels one `events` request may name. */
  maxTriggerChannels: 100,
  /** Users one signed-in user may watch (`watchlist` in its user data). */
  maxWatchlist: 100,
  /** How long a `auth_timestamp` of a signed HTTP request may be from the server's clock, seconds. */
  maxClockSkewSeconds: 600,
} as const;

// ---------------------------------------------------------------------------
// Channels and the rooms they map to
// ---------------------------------------------------------------------------

/** Pusher channel names: 1-164 characters from this set (`#server-to-user-{id}` is the one exception, the server's own). */
export const PUSHER_CHANNEL_PATTERN = /^[A-Za-z0-9_\-=@,.;]{1,164}$/;
/** The channel a signed-in user's server-to-user events travel on. */
export const SERVER_TO_USER_PREFIX = "#server-to-user-";

export type PusherChannelKind = "public" | "private" | "presence" | "encrypted" | "user";

export interface PusherChannel {
  name: string;
  kind: PusherChannelKind;
  /** A cache channel: a subscriber gets its last event at once, or `pusher:cache_miss`. */
  cache: boolean;
  /** For a `#server-to-user-{id}` channel: the user. */
  userId?: string;
}

/** What a channel's name says it is; null for a name Pusher would refuse. */
export function parsePusherChannel(name: string): PusherChannel | null {
  if (name.startsWith(SERVER_TO_USER_PREFIX)) {
    const userId = name.slice(SERVER_TO_USER_PREFIX.length);
    if (userId === "" || userId.length > PUSHER_LIMITS.maxUserIdLength || !PUSHER_CHANNEL_PATTERN.test(userId)) return null;
    return { name, kind: "user", cache: false, userId };
  }
  if (!PUSHER_CHANNEL_PATTERN.test(name)) return null;
  if (name.startsWith("private-encrypted-")) return { name, kind: "encrypted", cache: name.startsWith("private-encrypted-cache-") };
  if (name.startsWith("private-")) return { name, kind: "private", cache: name.startsWith("private-cache-") };
  if (name.startsWith("presence-")) return { name, kind: "presence", cache: name.startsWith("presence-cache-") };
  return { name, kind: "public", cache: name.startsWith("cache-") };
}

/** Whether a channel needs a signature to subscribe (and is closed to this service's own protocol without a token that grants it). */
export function isAuthorizedChannel(kind: PusherChannelKind): boolean {
  return kind !== "public";
}

/** Room names of Pusher channels start with this, then the app's id and a colon. */
export const PUSHER_ROOM_PREFIX = "pusher:";
/** App ids: what Pusher issues (digits), or any short name of letters, digits, `_` and `-`. */
export const PUSHER_APP_ID_PATTERN = /^[A-Za-z0-9_-]{1,32}$/;
/** A Pusher channel's room name: longer than other room names may be (up to 400 characters). */
export const PUSHER_ROOM_PATTERN = /^pusher:[A-Za-z0-9_-]{1,32}:[A-Za-z0-9._~-]{1,360}$/;

/**
 * Characters of channel names that room names do not allow, each written as
 * `~` and a letter. `~` never occurs in a channel name, so the mapping cannot
 * collide and reads back; it keeps prefixes, so a channel prefix maps to a
 * room-name prefix.
 */
const ESCAPES: Readonly<Record<string, string>> = { "=": "~e", "@": "~a", ",": "~c", ";": "~s", "#": "~h" };
const UNESCAPES: Readonly<Record<string, string>> = { e: "=", a: "@", c: ",", s: ";", h: "#" };

/** The channel name (or prefix) as it appears in a room name. */
export function escapeChannel(channel: string): string {
  return channel.replace(/[=@,;#]/g, (c) => ESCAPES[c] as string);
}

/** The room that holds channel `channel` of app `appId`: `pusher:{appId}:{channel, escaped}`. */
export function pusherRoom(appId: string, channel: string): string {
  return `${PUSHER_ROOM_PREFIX}${appId}:${escapeChannel(channel)}`;
}

/** The app and channel a room holds, or null for a room that is not a Pusher channel's. */
export function channelOfRoom(room: string): { appId: string; channel: string } | null {
  if (!PUSHER_ROOM_PATTERN.test(room)) return null;
  const colon = room.indexOf(":", PUSHER_ROOM_PREFIX.length);
  const appId = room.slice(PUSHER_ROOM_PREFIX.length, colon);
  let channel = "";
  const escaped = room.slice(colon + 1);
  for (let i = 0; i < escaped.length; i++) {
    const c = escaped[i] as string;
    if (c !== "~") {
      channel += c;
      continue;
    }
    const plain = UNESCAPES[escaped[i + 1] ?? ""];
    if (plain === undefined) return null;
    channel += plain;
    i += 1;
  }
  return parsePusherChannel(channel) ? { appId, channel } : null;
}

/** How long a cache channel's last event is kept, as Pusher keeps it (30 minutes). */
export const PUSHER_CACHE_SECONDS = 1800;

/** Whether a room holds a Pusher cache channel (its last event is what a new subscriber gets first). */
export function isCacheChannelRoom(room: string): boolean {
  if (!room.startsWith(PUSHER_ROOM_PREFIX)) return false;
  const held = channelOfRoom(room);
  return held !== null && (parsePusherChannel(held.channel) as PusherChannel).cache;
}

/**
 * Whether a room is a channel Pusher keeps private (`private-`, `presence-`,
 * `private-encrypted-`, `#server-to-user-`): this service's own protocol
 * reaches it only with a token that grants it, never in open mode.
 */
export function isPrivatePusherRoom(room: string): boolean {
  if (!room.startsWith(PUSHER_ROOM_PREFIX)) return false;
  const held = channelOfRoom(room);
  // A name under the prefix that maps to no channel is no channel's: nothing private to keep.
  if (!held) return false;
  return isAuthorizedChannel((parsePusherChannel(held.channel) as PusherChannel).kind);
}

// ---------------------------------------------------------------------------
// The HTTP API (`/apps/{app_id}/...`), as Pusher's server SDKs call it
// ---------------------------------------------------------------------------

/** Path of the HTTP API: `/apps/{app_id}/...`. */
export const PUSHER_API_PREFIX = "/apps/";
/** The only `auth_version` Pusher defines. */
export const PUSHER_AUTH_VERSION = "1.0";
/**
 * Largest request body: ten events of 10 KB of data, each as a JSON string
 * (where a control character takes six bytes for one), and the names of a
 * hundred channels. Past it the answer is 413 before anything is parsed.
 */
export const PUSHER_API_MAX_BODY_BYTES = 1024 * 1024;

/** Attributes a request may ask of a channel with `info=` (comma-separated). */
export type PusherChannelAttribute = "user_count" | "subscription_count" | "cache";

/** One event of `POST /apps/{app_id}/events` (`channel` or `channels`) or of a `batch_events` batch (`channel`). */
export interface PusherTriggerBody {
  name: string;
  /** The event's data: a string (the SDKs encode objects as JSON text), at most `maxEventDataBytes`. */
  data: string;
  channel?: string;
  /** Up to `maxTriggerChannels` channels. */
  channels?: string[];
  /** A connection the event is not sent to (the sender of what the server relays). */
  socket_id?: string;
  /** `user_count` and/or `subscription_count`: the answer says them for each channel. */
  info?: string;
}

/** Body of `POST /apps/{app_id}/batch_events`: at most `maxBatchEvents` events. */
export interface PusherBatchBody {
  batch: PusherTriggerBody[];
}

/** What `info=` asked of a channel: `user_count` for presence channels only. */
export interface PusherChannelAttributes {
  user_count?: number;
  subscription_count?: number;
}

/** Answer of `POST events`: `{}`, or with `info` the attributes of each channel. */
export interface PusherTriggerAnswer {
  channels?: Record<string, PusherChannelAttributes>;
}

/** Answer of `POST batch_events`: `{}`, or when an event asked `info`, one entry per event, in order. */
export interface PusherBatchAnswer {
  batch?: PusherChannelAttributes[];
}

/** Answer of `GET /apps/{app_id}/channels`: occupied channels and what `info=` asked of each. */
export interface PusherChannelList {
  channels: Record<string, PusherChannelAttributes>;
}

/** Answer of `GET /apps/{app_id}/channels/{channel}`. */
export interface PusherChannelInfo extends PusherChannelAttributes {
  occupied: boolean;
  /** `info=cache` on a cache channel holding an event: its data and the seconds it is kept for. */
  cache?: { data: string; ttl: number };
}

/** Answer of `GET /apps/{app_id}/channels/{presence-…}/users`. */
export interface PusherUserList {
  users: { id: string }[];
}

// ---------------------------------------------------------------------------
// Webhooks in Pusher's format (PUSHER_WEBHOOK_URL)
// ---------------------------------------------------------------------------

/** Every Pusher webhook event, by its `name`. */
export const PUSHER_WEBHOOK_EVENTS = ["channel_occupied", "channel_vacated", "member_added", "member_removed", "client_event", "cache_miss"] as const;

export type PusherWebhookEventName = (typeof PUSHER_WEBHOOK_EVENTS)[number];

/**
 * The events sent when PUSHER_WEBHOOK_EVENTS is not set: a channel's
 * existence and its members. `client_event` and `cache_miss` must be asked
 * for: each is one per client event or per subscriber that found no cache,
 * every one of them rows written to the channel's storage and a request's
 * share, as Pusher, too, sends each only when the app turns it on.
 */
export const DEFAULT_PUSHER_WEBHOOK_EVENTS: readonly PusherWebhookEventName[] = ["channel_occupied", "channel_vacated", "member_added", "member_removed"];

/** The header that names the app a webhook is from (its key). */
export const PUSHER_KEY_HEADER = "X-Pusher-Key";
/** The header with the hex HMAC-SHA256 of the raw body, keyed with the app's secret. */
export const PUSHER_SIGNATURE_HEADER = "X-Pusher-Signature";

/** One event of a Pusher webhook. */
export type PusherWebhookEvent =
  | { name: "channel_occupied" | "channel_vacated" | "cache_miss"; channel: string }
  | { name: "member_added" | "member_removed"; channel: string; user_id: string }
  | {
      name: "client_event";
      channel: string;
      /** The client event's name (`client-…`). */
      event: string;
      /** Its data, as the client sent it (a string). */
      data: string;
      socket_id: string;
      /** On a presence channel: the sender's user id. */
      user_id?: string;
    };

/** The body of one Pusher webhook request: one channel's events, oldest first. */
export interface PusherWebhookBody {
  /** When the request was sent, epoch milliseconds. */
  time_ms: number;
  events: PusherWebhookEvent[];
}
