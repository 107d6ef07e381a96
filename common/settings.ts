/**
 * Every setting the service reads from its environment (wrangler.toml vars,
 * secrets), read here and nowhere else: one rule per var, parsed once per
 * environment object, and every limit's default (DEFAULTS). The worker and
 * the objects it exports (rooms, leaves, coordinator shards) all run in the
 * Workers runtime and share this reader.
 *
 * Limits fall back to DEFAULTS when absent; a var that breaks its rule is
 * ignored (and logged) rather than taking the service down. What a client
 * needs of them is announced in the welcome event, so none of this ships in
 * the browser SDK.
 */
import { DEFAULT_WEBHOOK_EVENTS, WEBHOOK_EVENT_TYPES, type WebhookEventType } from "../protocol/webhooks.js";
import { DEFAULT_PUSHER_WEBHOOK_EVENTS, PUSHER_WEBHOOK_EVENTS, type PusherWebhookEventName } from "../protocol/pusher.js";
import { logEvent } from "./log";
import { MAX_HISTORY_MESSAGES, parseHistoryRules, type HistoryRule } from "./retention";

export const DEFAULTS = {
  /** Largest message, bytes of its data as stored JSON text (HTTP body or socket publish). */
  MAX_MESSAGE_BYTES: 64 * 1024,
  /**
   * Largest client frame, bytes; larger frames close the socket with 1009. It is at least
   * three times MAX_MESSAGE_BYTES plus FRAME_ENVELOPE_BYTES (frameBytesFor), so the largest
   * message fits in any honest encoding with its envelope (a client that escapes every
   * non-ASCII character as \uXXXX sends up to three times the UTF-8 bytes), and a message
   * over its limit is refused with `too_large` while the socket stays.
   */
  MAX_FRAME_BYTES: 3 * 64 * 1024 + 1024,
  /** Messages kept in a room's history for resume and catch-up. */
  HISTORY_MAX_MESSAGES: 1000,
  /** Age after which history messages are no longer served, seconds. */
  HISTORY_MAX_AGE_SECONDS: 120,
  /**
   * How long a publish's idempotency key (HTTP `Idempotency-Key`, a socket publish's `key`) is
   * recognised, seconds; 0 = keys are not kept. A key is stored in its message's history row,
   * so it reaches back at most as far as the room's history does (docs/history.md).
   */
  PUBLISH_DEDUPE_SECONDS: 120,
  /** Unacknowledged bytes the room sends a socket before waiting for its ack (0 = no window). */
  WINDOW_BYTES: 1024 * 1024,
  /** Milliseconds a socket may stay behind without acknowledging anything before it is closed with SLOW_CONSUMER. */
  SLOW_GRACE_MS: 10_000,
  /** Upper bound of one coalesced frame, bytes (a single larger message is still sent alone). */
  BATCH_MAX_BYTES: 64 * 1024,
  /** Upper bound of one coalesced frame, events. */
  BATCH_MAX_EVENTS: 256,
  /** Extra milliseconds to wait for more messages before a flush (and its one history row); 0 = never wait. */
  FLUSH_DELAY_MS: 0,
  /** A socket with no ping and no frame for this long is closed with IDLE_TIMEOUT. */
  IDLE_TIMEOUT_SECONDS: 90,
  /** Sockets one room accepts; kept below the platform's 32,768 hibernatable sockets per object. */
  MAX_SOCKETS_PER_ROOM: 32_000,
  /** Sustained client frames per second per socket, besides heartbeats and acks that release a frame. */
  CLIENT_FRAMES_PER_SECOND: 20,
  /** Client frames a socket may send in a burst above the sustained rate. */
  CLIENT_FRAME_BURST: 60,
  /** Names one explicit POST /broadcast `rooms` list may hold. */
  BROADCAST_MAX_ROOMS: 1000,
  /** Live-room registry shards (a room belongs to shard hash(name) mod this). */
  COORDINATOR_SHARDS: 16,
  /** A member whose last socket left is announced as leaving only after this long without one. */
  PRESENCE_LEAVE_DELAY_MS: 3000,
  /** Above this many members, sockets get only the member count, not join and leave events. */
  PRESENCE_MAX_MEMBERS: 100,
  /** Above PRESENCE_MAX_MEMBERS, the count is sent at most this often (and only when it changed). */
  PRESENCE_COUNT_INTERVAL_MS: 1000,
  /**
   * Sockets one object of a room takes before the next socket goes to a leaf object of the
   * room (docs/sharded-rooms.md): the root's own share, and each leaf's. 0 = never shard.
   */
  ROOM_SHARD_SOCKETS: 3000,
  /** Leaf objects one room may open; with ROOM_SHARD_SOCKETS it bounds a room's sockets. */
  ROOM_MAX_LEAVES: 64,
  /** A leaf that has had no socket for this long is retired (the root stops pushing to it). */
  ROOM_LEAF_RETIRE_MS: 30_000,
  /** Rooms one multiplexed connection (`GET /ws`) may follow at once. */
  MAX_ROOMS_PER_CONNECTION: 100,
  /** Sustained subscribes per second one multiplexed connection may send; past its burst they are refused with `rate_limited`. */
  SUBSCRIBES_PER_SECOND: 20,
  /** Subscribes a multiplexed connection may send at once (a client opening with its rooms). */
  SUBSCRIBE_BURST: 100,
  /** Objects that hold multiplexed connections (docs/multiplexing.md): each connection goes to one of them. */
  MULTIPLEX_HUBS: 16,
  /** Multiplexed connections one of those objects takes; past it a connection goes to another, or gets 503. */
  MAX_CONNECTIONS_PER_HUB: 2000,
  /** Webhook events per request, and per row of a room's outbox (docs/webhooks.md). */
  WEBHOOK_BATCH_MAX_EVENTS: 100,
  /** Undelivered rows a room's webhook outbox keeps; past it the oldest become dead letters. */
  WEBHOOK_OUTBOX_MAX_ROWS: 1000,
  /** A webhook event still undelivered this long after it was recorded becomes a dead letter. */
  WEBHOOK_RETRY_SECONDS: 86_400,
  /** Longest wait between two attempts of a failing webhook request (the backoff's ceiling). */
  WEBHOOK_BACKOFF_MAX_MS: 300_000,
} as const;

export type LimitName = keyof typeof DEFAULTS;
export type Limits = { -readonly [K in LimitName]: number };

/** Upper bound on BROADCAST_MAX_ROOMS: the body of such a list is already ~670 KB. */
export const MAX_BROADCAST_ROOMS = 10_000;
/** Upper bound on shards: a listing page asks every shard, so the count stays modest. */
export const MAX_SHARDS = 1024;
/** Upper bound on PRESENCE_MAX_MEMBERS. */
export const MAX_PRESENCE_MEMBERS = 1000;
/**
 * Upper bound on ROOM_MAX_LEAVES: the root pushes every flush to each leaf, one RPC apiece,
 * so K leaves are K subrequests per flush (docs/sharded-rooms.md, limits).
 */
export const MAX_ROOM_LEAVES = 1000;
/** Upper bound on ROOM_SHARD_SOCKETS: the platform's 32,768 hibernatable sockets per object, with a margin. */
export const MAX_SHARD_SOCKETS = 32_000;
/**
 * Upper bound on MAX_ROOMS_PER_CONNECTION: a connection's subscriptions live in its attachment
 * (at most 16 KiB) beside its identity, about 70 bytes a room.
 */
export const MAX_ROOMS_PER_CONNECTION = 150;
/** Upper bound on MULTIPLEX_HUBS: a room's flush is one push per hub that follows it. */
export const MAX_HUBS = 1024;

/**
 * Largest connection data a room's hooks may attach to a socket (onConnect,
 * connection.setData), bytes of its JSON text. It lives in the socket's
 * attachment beside the member's identity (at most ~1.8 KB), and the platform
 * keeps attachments of at most 16 KiB through hibernation.
 */
export const MAX_CONNECTION_DATA_BYTES = 4096;

/**
 * Frames of one socket that may wait for the room's hooks (beforePublish,
 * onClientFrame run one frame at a time per socket, in arrival order). Past
 * it, further publishes and custom frames are refused with `rate_limited`
 * until the hooks catch up: a slow hook must not queue without bound.
 */
export const MAX_FRAMES_AWAITING_HOOKS = 64;

/** Room a publish frame takes around its data: `{"type":"publish","data":...,"id":"<128 characters>"}` and then some. */
export const FRAME_ENVELOPE_BYTES = 1024;

/**
 * The smallest frame limit that still leaves room for the largest message of
 * `maxMessageBytes` in any honest encoding: `\u00e9` is six bytes for a
 * character that is two in UTF-8, a surrogate pair twelve for four.
 */
export function frameBytesFor(maxMessageBytes: number): number {
  return 3 * maxMessageBytes + FRAME_ENVELOPE_BYTES;
}

/** Vars whose range is narrower than "a non-negative integer". */
const BOUNDS: Partial<Record<LimitName, readonly [min: number, max: number]>> = {
  HISTORY_MAX_MESSAGES: [0, MAX_HISTORY_MESSAGES],
  // A day: past it a retry is a new publish; broadcasts keep their keys a day on their own.
  PUBLISH_DEDUPE_SECONDS: [0, 86_400],
  COORDINATOR_SHARDS: [1, MAX_SHARDS],
  BROADCAST_MAX_ROOMS: [1, MAX_BROADCAST_ROOMS],
  // A snapshot lists every member: 1,000 members of up to ~1.3 KB each is already a 1.3 MB frame.
  PRESENCE_MAX_MEMBERS: [0, MAX_PRESENCE_MEMBERS],
  ROOM_SHARD_SOCKETS: [0, MAX_SHARD_SOCKETS],
  ROOM_MAX_LEAVES: [1, MAX_ROOM_LEAVES],
  ROOM_LEAF_RETIRE_MS: [0, 3_600_000],
  MAX_ROOMS_PER_CONNECTION: [1, MAX_ROOMS_PER_CONNECTION],
  SUBSCRIBE_BURST: [1, 10_000],
  MULTIPLEX_HUBS: [1, MAX_HUBS],
  MAX_CONNECTIONS_PER_HUB: [1, MAX_SHARD_SOCKETS],
  WEBHOOK_BATCH_MAX_EVENTS: [1, 1000],
  WEBHOOK_OUTBOX_MAX_ROWS: [1, 100_000],
  WEBHOOK_RETRY_SECONDS: [60, 7 * 86_400],
  WEBHOOK_BACKOFF_MAX_MS: [1000, 3_600_000],
};

/** Access control. An absent or empty secret switches its check off (open mode). */
export interface AccessSettings {
  /** Bearer key for HTTP publishing, /broadcast, /rooms and /metrics; null = open. */
  publishKey: string | null;
  /** HS256 secret for subscribe tokens; null = sockets open to anyone. */
  tokenSecret: string | null;
  /** Browser origins allowed to open sockets; null = any origin. */
  allowedOrigins: ReadonlySet<string> | null;
  /** HMAC-SHA256 key that signs webhook requests; null = they go unsigned (and the service says so). */
  webhookSecret: string | null;
}

/** Where and what rooms send as webhooks (docs/webhooks.md); the signing key is in AccessSettings. */
export interface WebhookSettings {
  /** WEBHOOK_URL: the one address webhooks are sent to (http or https). */
  url: string;
  /** WEBHOOK_EVENTS: the event types rooms record (DEFAULT_WEBHOOK_EVENTS when unset). */
  events: ReadonlySet<WebhookEventType>;
  /** WEBHOOK_MESSAGE_PREFIX: `message.published` only for rooms whose name starts with it; null = every room. */
  messagePrefix: string | null;
}

/** The Pusher app the front door serves (docs/pusher.md): one app, from the PUSHER_* vars. */
export interface PusherApp {
  /** PUSHER_APP_ID: the `{app_id}` of `/apps/{app_id}/...` and of the channels' room names. */
  id: string;
  /** PUSHER_APP_KEY: the `{key}` of `/app/{key}`, public (clients hold it). */
  key: string;
  /** PUSHER_APP_SECRET: signs channel authorizations, sign-ins, HTTP requests and webhooks. */
  secret: string;
  /** PUSHER_CLIENT_EVENTS=1: clients may send `client-*` events on private and presence channels. */
  clientEvents: boolean;
  /** PUSHER_WEBHOOK_URL: where Pusher-format webhooks of the app's channels go; null = none. */
  webhookUrl: string | null;
  /** PUSHER_WEBHOOK_EVENTS: the Pusher webhook events the channels' rooms record (DEFAULT_PUSHER_WEBHOOK_EVENTS when unset). */
  webhookEvents: ReadonlySet<PusherWebhookEventName>;
}

/** The front door is on with its app, or off and why (said at startup and to a client that knocks). */
export type PusherSettings = { app: PusherApp; off?: undefined } | { app: null; off: string };

/** Text vars the service reads besides the limits and the secrets (docs/protocol.md, docs/webhooks.md, docs/history.md, docs/pusher.md). */
export const TEXT_VARS = [
  "ALLOWED_ORIGINS",
  "HISTORY_RULES",
  "WEBHOOK_URL",
  "WEBHOOK_EVENTS",
  "WEBHOOK_MESSAGE_PREFIX",
  "PUSHER_APP_ID",
  "PUSHER_APP_KEY",
  "PUSHER_CLIENT_EVENTS",
  "PUSHER_WEBHOOK_URL",
  "PUSHER_WEBHOOK_EVENTS",
] as const;
/** Secrets: `wrangler secret put`, never vars. */
export const SECRET_VARS = ["PUBLISH_KEY", "TOKEN_SECRET", "WEBHOOK_SECRET", "PUSHER_APP_SECRET"] as const;

export interface Settings {
  limits: Limits;
  access: AccessSettings;
  /** Null when WEBHOOK_URL is not set (or not a usable URL): rooms record nothing. */
  webhooks: WebhookSettings | null;
  /** HISTORY_RULES: history bounds by room-name prefix, longest prefix first (common/retention.ts). */
  historyRules: readonly HistoryRule[];
  pusher: PusherSettings;
}

const cache = new WeakMap<object, Settings>();

/** The settings of `env`, parsed on first use and kept for as long as that environment object lives. */
export function settingsOf(env: Record<string, unknown>): Settings {
  let settings = cache.get(env);
  if (!settings) {
    settings = {
      limits: parseLimits(env),
      access: parseAccess(env),
      webhooks: parseWebhooks(env),
      historyRules: parseHistoryRules(env.HISTORY_RULES),
      pusher: parsePusher(env),
    };
    cache.set(env, settings);
  }
  return settings;
}

export function readLimits(env: Record<string, unknown>): Limits {
  return settingsOf(env).limits;
}

export function accessSettings(env: Record<string, unknown>): AccessSettings {
  return settingsOf(env).access;
}

export function webhookSettings(env: Record<string, unknown>): WebhookSettings | null {
  return settingsOf(env).webhooks;
}

export function historyRules(env: Record<string, unknown>): readonly HistoryRule[] {
  return settingsOf(env).historyRules;
}

export function pusherSettings(env: Record<string, unknown>): PusherSettings {
  return settingsOf(env).pusher;
}

/** Origins compare as `scheme://host[:port]`, lower-case, without a trailing slash. */
export function normalizeOrigin(origin: string): string {
  return origin.trim().replace(/\/+$/, "").toLowerCase();
}

function parseLimits(env: Record<string, unknown>): Limits {
  const limits = { ...DEFAULTS } as Limits;
  for (const key of Object.keys(DEFAULTS) as LimitName[]) {
    const raw = env[key];
    if (raw === undefined || raw === null || raw === "") continue;
    const value = Number(raw);
    const [min, max] = BOUNDS[key] ?? [0, Number.MAX_SAFE_INTEGER];
    if (Number.isSafeInteger(value) && value >= min && value <= max) {
      limits[key] = value;
    } else {
      logEvent("bad_config", { var: key, value: String(raw), min, max });
    }
  }
  const frameFloor = frameBytesFor(limits.MAX_MESSAGE_BYTES);
  if (limits.MAX_FRAME_BYTES < frameFloor) {
    // A frame limit below it would close the socket of a client whose message is merely too large.
    if (env.MAX_FRAME_BYTES !== undefined && env.MAX_FRAME_BYTES !== "") {
      logEvent("bad_config", { var: "MAX_FRAME_BYTES", value: String(env.MAX_FRAME_BYTES), min: frameFloor, raisedTo: frameFloor });
    }
    limits.MAX_FRAME_BYTES = frameFloor;
  }
  return limits;
}

function text(env: Record<string, unknown>, name: string): string | null {
  const value = env[name];
  return typeof value === "string" && value.trim() !== "" ? value : null;
}

function parseAccess(env: Record<string, unknown>): AccessSettings {
  const list = text(env, "ALLOWED_ORIGINS");
  const origins = list === null ? [] : list.split(",").map(normalizeOrigin).filter((o) => o !== "");
  return {
    publishKey: text(env, "PUBLISH_KEY"),
    tokenSecret: text(env, "TOKEN_SECRET"),
    allowedOrigins: origins.length > 0 ? new Set(origins) : null,
    webhookSecret: text(env, "WEBHOOK_SECRET"),
  };
}

/** An http or https URL from var `name`, or null (unset, or unusable: logged, without the value, which may hold credentials). */
function webhookUrl(env: Record<string, unknown>, name: string): string | null {
  const raw = text(env, name);
  if (raw === null) return null;
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    url = new URL("invalid:");
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    logEvent("bad_config", { var: name, problem: "not an http or https URL; webhooks are off" });
    return null;
  }
  if (url.username !== "" || url.password !== "") {
    // Credentials in a var would show wherever vars do (the dashboard, wrangler.toml); the secret signs requests instead.
    logEvent("bad_config", { var: name, problem: "holds credentials (user:password@), which are not sent; webhooks are off. Sign requests with the secret, or put a token in the path" });
    return null;
  }
  return url.href;
}

/** App ids and keys: what Pusher issues, or any short name of letters, digits, `_` and `-`. */
const PUSHER_NAME = /^[A-Za-z0-9_-]{1,64}$/;

function parsePusher(env: Record<string, unknown>): PusherSettings {
  const id = text(env, "PUSHER_APP_ID");
  const key = text(env, "PUSHER_APP_KEY");
  const secret = text(env, "PUSHER_APP_SECRET");
  if (id === null && key === null && secret === null) return { app: null, off: "PUSHER_APP_ID, PUSHER_APP_KEY and PUSHER_APP_SECRET are not set" };
  const missing = [id === null ? "PUSHER_APP_ID" : "", key === null ? "PUSHER_APP_KEY" : "", secret === null ? "PUSHER_APP_SECRET" : ""].filter((n) => n !== "");
  if (missing.length > 0) return { app: null, off: `${missing.join(" and ")} ${missing.length > 1 ? "are" : "is"} not set` };
  if (!/^[A-Za-z0-9_-]{1,32}$/.test(id as string)) {
    logEvent("bad_config", { var: "PUSHER_APP_ID", problem: "1-32 letters, digits, _ or -; the Pusher front door is off" });
    return { app: null, off: "PUSHER_APP_ID is not 1-32 letters, digits, _ or -" };
  }
  if (!PUSHER_NAME.test(key as string)) {
    logEvent("bad_config", { var: "PUSHER_APP_KEY", problem: "1-64 letters, digits, _ or -; the Pusher front door is off" });
    return { app: null, off: "PUSHER_APP_KEY is not 1-64 letters, digits, _ or -" };
  }
  const clientEvents = text(env, "PUSHER_CLIENT_EVENTS");
  return {
    app: {
      id: id as string,
      key: key as string,
      secret: secret as string,
      clientEvents: clientEvents !== null && ["1", "true", "on", "yes"].includes(clientEvents.trim().toLowerCase()),
      webhookUrl: webhookUrl(env, "PUSHER_WEBHOOK_URL"),
      webhookEvents: eventList(env, "PUSHER_WEBHOOK_EVENTS", PUSHER_WEBHOOK_EVENTS, DEFAULT_PUSHER_WEBHOOK_EVENTS),
    },
  };
}

/** The event names var `name` lists (comma-separated; `defaults` when unset); a name not in `known` is logged and ignored. */
function eventList<Name extends string>(env: Record<string, unknown>, name: string, known: readonly Name[], defaults: readonly Name[]): ReadonlySet<Name> {
  const names = new Set<string>(known);
  const listed = text(env, name);
  const events = new Set<Name>();
  for (const event of listed === null ? defaults : listed.split(",").map((n) => n.trim()).filter((n) => n !== "")) {
    if (names.has(event)) events.add(event as Name);
    else logEvent("bad_config", { var: name, value: event, problem: "not an event type; ignored", known: [...known] });
  }
  return events;
}

function parseWebhooks(env: Record<string, unknown>): WebhookSettings | null {
  const href = webhookUrl(env, "WEBHOOK_URL");
  if (href === null) return null;
  const url = new URL(href);
  const events = eventList<WebhookEventType>(env, "WEBHOOK_EVENTS", WEBHOOK_EVENT_TYPES, DEFAULT_WEBHOOK_EVENTS);
  const prefix = env.WEBHOOK_MESSAGE_PREFIX;
  return { url: url.href, events, messagePrefix: typeof prefix === "string" && prefix !== "" ? prefix : null };
}
