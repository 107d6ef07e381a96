import { channelOfRoom, parsePusherChannel } from "../../protocol/pusher";
import { accessSettings, pusherSettings, webhookSettings } from "../../common/settings";
import { PusherWebhookFormat } from "./pusher-webhook-format";
import { ServiceWebhookFormat } from "./webhook-events";
import type { WebhookFormat } from "./webhook-format";

/** Where a room's webhook events go, and how they are written. */
export interface WebhookTarget {
  /** The only address requests go to. */
  url: string;
  /** The var that names it (errors say it instead of the address, which may hold credentials). */
  urlVar: "WEBHOOK_URL" | "PUSHER_WEBHOOK_URL";
  format: WebhookFormat;
  /** Messages are recorded only for rooms whose name starts with this (WEBHOOK_MESSAGE_PREFIX); null: every room. */
  messagePrefix: string | null;
}

/**
 * The webhook target of room `room` (docs/webhooks.md, docs/pusher.md#webhooks):
 * a room speaks one format to one receiver.
 * - The room of a channel of the Pusher app, when PUSHER_WEBHOOK_URL is set:
 *   Pusher's format to it. A signed-in user's `#server-to-user-` channel is
 *   the server's own, and tells nothing (the app signs its users in itself).
 * - Any other room, when WEBHOOK_URL is set: this service's own format.
 * - Else none: the room records nothing.
 */
export function webhookTarget(room: string, env: Record<string, unknown>): WebhookTarget | null {
  const app = pusherSettings(env).app;
  const held = app?.webhookUrl ? channelOfRoom(room) : null;
  if (app && app.webhookUrl && held && held.appId === app.id) {
    const channel = parsePusherChannel(held.channel);
    if (!channel || channel.kind === "user") return null;
    return { url: app.webhookUrl, urlVar: "PUSHER_WEBHOOK_URL", format: new PusherWebhookFormat(app, channel), messagePrefix: null };
  }
  const own = webhookSettings(env);
  if (!own) return null;
  return { url: own.url, urlVar: "WEBHOOK_URL", format: new ServiceWebhookFormat(own.events, accessSettings(env).webhookSecret), messagePrefix: own.messagePrefix };
}
