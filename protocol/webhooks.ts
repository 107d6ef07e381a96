/**
 * Webhooks (docs/webhooks.md): what the service POSTs to `WEBHOOK_URL`. A
 * receiver reads these shapes; each request is one JSON body holding a batch
 * of events of one room, in the order the room recorded them, signed with
 * `WEBHOOK_SECRET`.
 */
import type { PusherWebhookEventName } from "./pusher.js";

/** Every event type, in the order docs/webhooks.md describes them. */
export const WEBHOOK_EVENT_TYPES = ["room.occupied", "room.vacated", "member.joined", "member.left", "message.published"] as const;

/** One event type: `room.occupied`, `room.vacated`, `member.joined`, `member.left` or `message.published`. */
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/** The events a room records when `WEBHOOK_EVENTS` is not set: everything but messages, which must be asked for. */
export const DEFAULT_WEBHOOK_EVENTS: readonly WebhookEventType[] = ["room.occupied", "room.vacated", "member.joined", "member.left"];

/** The header that carries the signature: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`. */
export const WEBHOOK_SIGNATURE_HEADER = "Webhook-Signature";

/** What every event carries. */
interface WebhookEventBase<Type extends WebhookEventType, Data> {
  /** Unique over every room and stable across retries: a receiver that has seen an id has seen that event. */
  id: string;
  /** What happened (WEBHOOK_EVENT_TYPES). */
  type: Type;
  /** The room it happened in. */
  room: string;
  /** When the change happened, epoch milliseconds (server clock). */
  ts: number;
  data: Data;
}

/** A member as a join describes it (the same fields as presence: docs/protocol.md#presence). */
export interface WebhookMember {
  /** The member's id: a token's `sub`, or an open-mode name. */
  id: string;
  /** The member's `info` (a token's `info` claim, or `?info=` in open mode), when it has one. */
  info?: unknown;
  /** True when a subscribe token named the member; false in open mode, where anyone can choose any name. */
  verified: boolean;
}

/** The room's first socket arrived (anywhere in the room, leaves included). */
export type RoomOccupiedEvent = WebhookEventBase<"room.occupied", Record<string, never>>;
/**
 * The room has had no socket for PRESENCE_LEAVE_DELAY_MS, and every member's `member.left` went before it.
 * `inferred`: true when the room did not see its last socket go: it started (after a deploy or a crash)
 * without its sockets, and none came back within the delay.
 */
export type RoomVacatedEvent = WebhookEventBase<"room.vacated", { inferred: boolean }>;
/** A member's first socket arrived (a member back within the leave delay is no new join). */
export type MemberJoinedEvent = WebhookEventBase<"member.joined", { member: WebhookMember }>;
/**
 * A member's last socket left PRESENCE_LEAVE_DELAY_MS ago. `inferred`: true when the room did not see it
 * go: the member was in the room when it stopped (a deploy, a crash), and did not come back within the
 * delay after the room started again.
 */
export type MemberLeftEvent = WebhookEventBase<"member.left", { member: { id: string }; inferred: boolean }>;
/** A message was stored with `seq` in the history of `epoch` (only when `WEBHOOK_EVENTS` names it). */
export type MessagePublishedEvent = WebhookEventBase<"message.published", { seq: number; epoch: string; data: unknown }>;

/**
 * One event of a webhook request's batch; `type` tells which.
 *
 * @example
 * ```ts
 * function handle(event: WebhookEvent): void {
 *   if (event.type === "member.joined") console.log(event.room, "joined by", event.data.member.id);
 * }
 * ```
 *
 * @see docs/webhooks.md#events
 */
export type WebhookEvent = RoomOccupiedEvent | RoomVacatedEvent | MemberJoinedEvent | MemberLeftEvent | MessagePublishedEvent;

/** The body of one webhook request. */
export interface WebhookBody {
  /** Events of one room, oldest first; a request is only sent once every earlier event of the room was acknowledged. */
  events: WebhookEvent[];
}

/** A room's webhooks in `GET /rooms/{room}` (present when WEBHOOK_URL is set). */
export interface RoomWebhookStats {
  /** Events recorded and not yet acknowledged by the receiver, and the rows that hold them. */
  pending: number;
  pendingRows: number;
  /** When the oldest of them was recorded, or null. */
  oldestPendingAt: number | null;
  /** Failed requests since the last one that succeeded. */
  failures: number;
  /** When the next request is due after a failure, or null. */
  nextAttemptAt: number | null;
  /** Why the last failed request failed (`status 503`, `timeout`, ...), or null after a success. */
  lastError: string | null;
  /** Events kept as dead letters (the newest rows of them: docs/webhooks.md#dead-letters). */
  deadLetters: number;
  /** The newest dead letters, newest first, at most 10. */
  recentDeadLetters: WebhookDeadLetter[];
  /** Members the receiver was told joined and not yet told left. */
  members: number;
  /** Whether the receiver was told the room is occupied (and not yet vacated). */
  occupied: boolean;
}

export interface WebhookDeadLetter {
  /** The event's id; empty for an event of Pusher's format, which carries none (docs/pusher.md#webhooks). */
  id: string;
  type: WebhookEventType | PusherWebhookEventName;
  /** `expired`: undelivered WEBHOOK_RETRY_SECONDS after it was recorded; `overflow`: the room's outbox was full. */
  reason: "expired" | "overflow";
  /** When it became a dead letter. */
  at: number;
}
