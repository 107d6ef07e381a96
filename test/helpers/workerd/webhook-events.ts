/**
 * Webhook events for unit tests of a room's webhook storage and delivery:
 * events as the service's own format writes them (one per member id, so a
 * test follows each by its id), and their ids read back from stored text.
 */
import { WEBHOOK_EVENT_TYPES } from "../../../protocol";
import { utf8Length } from "../../../common/utf8";
import { ServiceWebhookFormat } from "../../../durable-objects/room/webhook-events";
import type { OutboxEvent } from "../../../durable-objects/room/webhook-outbox";

/** The service's own format, every event type, unsigned: what a room of a deployment with WEBHOOK_URL writes. */
export const FORMAT = new ServiceWebhookFormat(new Set(WEBHOOK_EVENT_TYPES), null);

/** A `member.joined` event of member `id` whose event id is `id` too, with `info` padding it to about `padBytes`. */
export function joinedEvent(id: string, padBytes = 0, room = "hooked"): OutboxEvent {
  const info = padBytes > 0 ? JSON.stringify("x".repeat(padBytes)) : undefined;
  const text = FORMAT.eventText(id, { type: "member.joined", id, info, verified: true }, room, 0) as string;
  return { text, bytes: utf8Length(text) };
}

/** Events `<prefix>1`..`<prefix>n`. */
export function joinedEvents(prefix: string, count: number): OutboxEvent[] {
  return Array.from({ length: count }, (_, i) => joinedEvent(`${prefix}${i + 1}`));
}

/** The ids of stored event texts (comma-separated, as the outbox keeps them). */
export function idsOf(events: string): string[] {
  return (JSON.parse(`[${events}]`) as Array<{ id: string }>).map((e) => e.id);
}

/** Stored event texts as `type:member` (member events), `type:seq` (messages) or `type`, in order. */
export function summaryOf(events: string): string[] {
  const parsed = JSON.parse(`[${events}]`) as Array<{ type: string; data: { member?: { id: string }; seq?: number } }>;
  return parsed.map((e) => (e.data.member ? `${e.type}:${e.data.member.id}` : e.data.seq !== undefined ? `${e.type}:${e.data.seq}` : e.type));
}
