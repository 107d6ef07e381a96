import type { WebhookDeadLetter } from "../../protocol";
import type { Message } from "../engine/message";

/**
 * What a room decides to tell its webhook receiver, before any format
 * writes it: the room's existence, its members, a stored message, a cache
 * channel's miss. WebhookMembership and the room decide these; a format
 * (webhook-events.ts, this service's own; pusher-webhook-format.ts, Pusher's)
 * says which it sends and how each is written.
 */
export type RoomChange =
  | { type: "room.occupied" }
  | { type: "room.vacated"; inferred: boolean }
  | { type: "member.joined"; id: string; info: string | undefined; verified: boolean }
  | { type: "member.left"; id: string; inferred: boolean }
  /** A message stored with its seq in the history of `epoch` (inside the flush's transaction). */
  | { type: "message.published"; message: Message; epoch: string }
  /** A subscriber to the room's Pusher cache channel found no last event. */
  | { type: "cache.missed" };

export type RoomChangeType = RoomChange["type"];

/** One request to the receiver: its body and headers. */
export interface WebhookRequest {
  body: string;
  headers: Record<string, string>;
}

/**
 * How a room's webhooks look on the wire: which changes are sent at all, the
 * text of each event (written once when recorded, stored in the outbox and
 * sent as it is), and a request around a batch of stored events with its
 * signature. The outbox, the record, the recorder and the delivery are the
 * same whatever the format.
 */
export interface WebhookFormat {
  /** Whether changes of `type` are ever sent: the others are never recorded (nor paid for). */
  records(type: RoomChangeType): boolean;
  /** The stored text of one change's event (`id`: unique, stable across retries), or null when this format says nothing of it. */
  eventText(id: string, change: RoomChange, room: string, ts: number): string | null;
  /** The request that carries `events` (stored texts, comma-separated), sent at `now`. */
  request(events: string, now: number): Promise<WebhookRequest>;
  /** The id and type of a stored event, read back (dead letters name them). */
  describe(event: Record<string, unknown>): Pick<WebhookDeadLetter, "id" | "type">;
}
