import { WEBHOOK_SIGNATURE_HEADER, type WebhookDeadLetter, type WebhookEventType } from "../../protocol";
import { webhookSignature } from "../../common/webhook-signature";
import type { Message } from "../engine/message";
import type { RoomChange, RoomChangeType, WebhookFormat, WebhookRequest } from "./webhook-format";

/**
 * The service's own webhook format (protocol/webhooks.ts, docs/webhooks.md):
 * each event's JSON text built once when it is recorded, stored and sent as
 * it is; data that is already JSON text (a member's info, a message's data)
 * is embedded without parsing it again. A request is `{"events":[...]}`,
 * signed with WEBHOOK_SECRET when it is set.
 */
export class ServiceWebhookFormat implements WebhookFormat {
  readonly #events: ReadonlySet<WebhookEventType>;
  readonly #secret: string | null;

  /** `events`: WEBHOOK_EVENTS; `secret`: WEBHOOK_SECRET, or null (requests go unsigned). */
  constructor(events: ReadonlySet<WebhookEventType>, secret: string | null) {
    this.#events = events;
    this.#secret = secret;
  }

  records(type: RoomChangeType): boolean {
    return type !== "cache.missed" && this.#events.has(type);
  }

  eventText(id: string, change: RoomChange, room: string, ts: number): string | null {
    switch (change.type) {
      case "room.occupied":
        return eventText(id, change.type, room, ts, "{}");
      case "room.vacated":
        return eventText(id, change.type, room, ts, `{"inferred":${change.inferred}}`);
      case "member.joined":
        return eventText(id, change.type, room, ts, joinedData(change.id, change.info, change.verified));
      case "member.left":
        return eventText(id, change.type, room, ts, `{"member":{"id":${JSON.stringify(change.id)}},"inferred":${change.inferred}}`);
      case "message.published": {
        const published = publishedData(change.message, change.epoch);
        return eventText(id, change.type, room, published.ts, published.dataJson);
      }
      case "cache.missed":
        return null;
    }
  }

  async request(events: string, now: number): Promise<WebhookRequest> {
    const body = `{"events":[${events}]}`;
    const headers: Record<string, string> = { "content-type": "application/json", "user-agent": "edge-fanout-webhooks/1" };
    if (this.#secret !== null) headers[WEBHOOK_SIGNATURE_HEADER] = await webhookSignature(this.#secret, Math.floor(now / 1000), body);
    return { body, headers };
  }

  describe(event: Record<string, unknown>): Pick<WebhookDeadLetter, "id" | "type"> {
    // Texts this format wrote itself: their type is one of WEBHOOK_EVENT_TYPES.
    return { id: String(event.id ?? ""), type: event.type as WebhookEventType };
  }
}

/** One event, complete. */
function eventText(id: string, type: WebhookEventType, room: string, ts: number, dataJson: string): string {
  return `{"id":${JSON.stringify(id)},"type":"${type}","room":${JSON.stringify(room)},"ts":${ts},"data":${dataJson}}`;
}

/** `member.joined`'s data; `info` is the member's info as JSON text, when it has one. */
function joinedData(id: string, info: string | undefined, verified: boolean): string {
  const infoField = info === undefined ? "" : `,"info":${info}`;
  return `{"member":{"id":${JSON.stringify(id)}${infoField},"verified":${verified}}}`;
}

/**
 * `message.published`'s data and time, cut out of the stored message event
 * (engine/message.ts writes `..."data":<data>,"ts":<ts>,"tag":<tag>}` with
 * numbers last, so the last `,"ts":` is the event's own).
 */
function publishedData(message: Message, epoch: string): { ts: number; dataJson: string } {
  const event = message.event;
  const dataStart = event.indexOf(`"data":`) + 7;
  const tsAt = event.lastIndexOf(`,"ts":`);
  const tagAt = event.lastIndexOf(`,"tag":`);
  const ts = Number(event.slice(tsAt + 6, tagAt));
  return { ts, dataJson: `{"seq":${message.seq},"epoch":${JSON.stringify(epoch)},"data":${event.slice(dataStart, tsAt)}}` };
}
