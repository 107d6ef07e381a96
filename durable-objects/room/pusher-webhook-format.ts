import type { WebhookDeadLetter } from "../../protocol";
import { PUSHER_KEY_HEADER, PUSHER_SIGNATURE_HEADER, type PusherChannel, type PusherWebhookEventName } from "../../protocol/pusher";
import { pusherWebhookSignature } from "../../common/pusher-signatures";
import type { PusherApp } from "../../common/settings";
import type { RoomChange, RoomChangeType, WebhookFormat, WebhookRequest } from "./webhook-format";

/** The Pusher event each change is, when the app sends it. */
const PUSHER_NAMES: Readonly<Record<RoomChangeType, PusherWebhookEventName>> = {
  "room.occupied": "channel_occupied",
  "room.vacated": "channel_vacated",
  "member.joined": "member_added",
  "member.left": "member_removed",
  "message.published": "client_event",
  "cache.missed": "cache_miss",
};

/** A stored message event, as far as a `client_event` needs it (engine/message.ts writes the fields). */
interface StoredMessage {
  event?: string;
  socket_id?: string;
  user_id?: string;
  data?: unknown;
}

/** The start of a stored client event's fields: a message with an event name, written after its seq. */
const CLIENT_EVENT_MARK = `,"event":"client-`;

/**
 * Webhooks in Pusher's format (docs/pusher.md#webhooks), for the room of one
 * channel of the app: `{"time_ms", "events": [...]}` with `X-Pusher-Key` and
 * `X-Pusher-Signature` (hex HMAC-SHA256 of the body, keyed with the app's
 * secret) and `Content-Type: application/json`, as the server SDKs'
 * `webhook().isValid()` checks it. Changes map to Pusher's events:
 * `channel_occupied`, `channel_vacated`, `member_added` and `member_removed`
 * (presence channels), `client_event` (a stored message whose event name is
 * `client-…`), `cache_miss`; PUSHER_WEBHOOK_EVENTS says which are sent.
 * Pusher's events carry no id and no time of their own: the request's
 * `time_ms` is when it was sent.
 */
export class PusherWebhookFormat implements WebhookFormat {
  readonly #app: PusherApp;
  readonly #channel: PusherChannel;
  /** `"channel":"<name>"`, written into every event. */
  readonly #channelField: string;

  constructor(app: PusherApp, channel: PusherChannel) {
    this.#app = app;
    this.#channel = channel;
    this.#channelField = `"channel":${JSON.stringify(channel.name)}`;
  }

  records(type: RoomChangeType): boolean {
    // Only a presence channel has members in Pusher's sense (a member of this service's own protocol elsewhere is none).
    if ((type === "member.joined" || type === "member.left") && this.#channel.kind !== "presence") return false;
    if (type === "cache.missed" && !this.#channel.cache) return false;
    return this.#app.webhookEvents.has(PUSHER_NAMES[type]);
  }

  eventText(_id: string, change: RoomChange): string | null {
    const name = PUSHER_NAMES[change.type];
    switch (change.type) {
      case "room.occupied":
      case "room.vacated":
      case "cache.missed":
        return `{"name":"${name}",${this.#channelField}}`;
      case "member.joined":
      case "member.left":
        return `{"name":"${name}",${this.#channelField},"user_id":${JSON.stringify(change.id)}}`;
      case "message.published":
        return this.#clientEvent(change.message.event);
    }
  }

  async request(events: string, now: number): Promise<WebhookRequest> {
    const body = `{"time_ms":${now},"events":[${events}]}`;
    return {
      body,
      headers: {
        // Exactly this: the SDKs' webhook().isValid() compares the header to it.
        "content-type": "application/json",
        "user-agent": "edge-fanout-webhooks/1",
        [PUSHER_KEY_HEADER]: this.#app.key,
        [PUSHER_SIGNATURE_HEADER]: await pusherWebhookSignature(this.#app, body),
      },
    };
  }

  describe(event: Record<string, unknown>): Pick<WebhookDeadLetter, "id" | "type"> {
    // Texts this format wrote itself: their name is one of PUSHER_WEBHOOK_EVENTS; they have no id.
    return { id: "", type: event.name as PusherWebhookEventName };
  }

  /** A stored message as `client_event`, or null when it is not a client event (only those are Pusher's to tell). */
  #clientEvent(stored: string): string | null {
    // Most messages are not client events: a look at the fields written after the seq saves parsing them.
    const seqEnd = stored.indexOf(",", `{"type":"message","seq":`.length);
    if (seqEnd < 0 || !stored.startsWith(CLIENT_EVENT_MARK, seqEnd)) return null;
    const message = JSON.parse(stored) as StoredMessage;
    if (typeof message.event !== "string" || typeof message.socket_id !== "string") return null;
    const data = typeof message.data === "string" ? message.data : JSON.stringify(message.data ?? null);
    const user = this.#channel.kind === "presence" && message.user_id !== undefined ? `,"user_id":${JSON.stringify(message.user_id)}` : "";
    return `{"name":"client_event",${this.#channelField},"event":${JSON.stringify(message.event)},"data":${JSON.stringify(data)},"socket_id":${JSON.stringify(message.socket_id)}${user}}`;
  }
}
