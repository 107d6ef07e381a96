/**
 * Bodies of the HTTP API (docs/protocol.md, Endpoints): what the service
 * answers besides errors (errors.ts). A back end reads these; the browser SDK
 * needs none of them.
 */
import type { PresenceMember } from "./events.js";
import type { RoomWebhookStats } from "./webhooks.js";

/** Body of a `POST /rooms/{room}/publish` answer. */
export interface PublishAnswer {
  room: string;
  seq: number;
  /** Sockets the message was sent to live; sockets catching up get it from history a moment later. */
  recipients: number;
  /**
   * Present when the request's `Idempotency-Key` was already published with the same body: `seq`
   * is the first publish's, nothing was sent again and `recipients` is 0.
   */
  duplicate?: true;
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
  /** Webhook events recorded in the room's outbox (docs/webhooks.md). */
  webhookEvents: number;
  /** Webhook events the receiver acknowledged (answered 2xx). */
  webhookDelivered: number;
  /** Webhook requests sent, and those that failed (no answer in time, a network error, or not 2xx). */
  webhookRequests: number;
  webhookFailedRequests: number;
  /** Webhook events that became dead letters (undelivered for WEBHOOK_RETRY_SECONDS, or past the outbox's bound). */
  webhookDeadLetters: number;
  /** SQLite rows written for webhooks (the outbox, the record of members, dead letters), as the storage counts them. */
  webhookRowsWritten: number;
  /** Sockets refused or closed by the room, by reason (room_full, rate_limited, bad_frame, too_big, idle_timeout, token_expired). */
  refusals: Record<string, number>;
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
  /**
   * How much history the room keeps: its HISTORY_RULES rule's bounds (`rule`: its prefix), or the defaults (`rule`: null);
   * `store` false for an ephemeral room (its messages in memory only, docs/history.md#ephemeral-rooms).
   */
  retention: { maxMessages: number; maxAgeSeconds: number; store: boolean; rule: string | null };
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
  /**
   * Subscriptions of multiplexed connections (`GET /ws`) to this room: part
   * of `connections`, which counts each follower once however it is connected.
   */
  multiplexed?: number;
  /** Subscriptions of Pusher connections (`/app/{key}`, docs/pusher.md) to this room: part of `connections` too. */
  pusher?: number;
  /** A sharded room: each leaf object, asked when the stats were read; a room with multiplexed subscribers: each hub that follows it too. */
  leaves?: RoomLeafStats[];
  /** A sharded room: requests its root received since its instance started, by kind. */
  rootRequests?: RootRequests;
  /** A sharded room: pushes its root sent to leaves since its instance started. */
  leafPushes?: number;
  /** The room's webhooks, when WEBHOOK_URL is set (docs/webhooks.md). */
  webhooks?: RoomWebhookStats;
}

/** What the root of a sharded room was asked (`RoomStats.rootRequests`): the load on the one object every leaf depends on. */
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
  /** Present on a hub's line (a hub of multiplexed connections follows the room like a leaf): its number; `connections` are its subscriptions. */
  hub?: number;
  /** Present on a Pusher hub's line (it holds Pusher connections and follows the room like a leaf): its number. */
  pusherHub?: number;
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

/** Body of `GET /rooms/{room}/presence`: one page of members, in id order. */
export interface PresencePage {
  count: number;
  connections: number;
  members: PresenceMember[];
  /** Pass as `cursor` for the next page; null on the last page. */
  cursor: string | null;
}

/** One message in a history page: what a socket's `message` event carries, without its receipt tag. */
export interface HistoryMessage<T = unknown> {
  /** Position in the room's history. */
  seq: number;
  /** Publish time, ms since the epoch (server clock). */
  ts: number;
  /** The message's data. */
  data: T;
}

/** Body of `GET /rooms/{room}/messages` (docs/history.md). */
export interface HistoryPage<T = unknown> {
  /** The room's name. */
  room: string;
  /** The history the seqs belong to; a cursor of another epoch is refused with 409 `conflict`. */
  epoch: string;
  /** `forward`: oldest first; `backward`: newest first. */
  direction: "forward" | "backward";
  /** The page's messages, in `direction` order. */
  messages: HistoryMessage<T>[];
  /** Pass as `cursor` for the next page; null when the range holds nothing more. */
  cursor: string | null;
  /** Seqs of the range that history no longer holds (before its oldest kept message), or null. */
  lost: { from: number; to: number } | null;
  /** SQLite rows read for this page (each holds one flush's messages): what the page cost. */
  rowsRead: number;
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
  /**
   * Rooms known to hold the message: they answered (delivered now, or had the key already), or an
   * earlier request with the same key recorded their answer. A room in `failed` may hold it too.
   */
  rooms: number;
  /** Sockets the message was sent to by this request. */
  sockets: number;
  /** Rooms that already had this key and sent nothing again. */
  duplicates: number;
  /** True when every room reached already had the key: a repeated request. */
  duplicate: boolean;
  /** Rooms whose own beforePublish hook refused the message (they hold nothing; not retried). */
  refused: number;
  /**
   * Rooms without sockets this request reached at their pace (BROADCAST_IDLE_ROOMS_PER_SECOND,
   * docs/coordinator.md): what made it take longer than its live rooms did.
   */
  paced: number;
  /** Rooms that still failed after every retry (at most 100 names; see failedCount). */
  failed: string[];
  failedCount: number;
  /** Shards that could not be reached: their rooms are in `failed` (explicit lists) or unknown (prefix). */
  failedShards: number[];
}
