/**
 * Pusher's signatures, all HMAC-SHA256 with the app's secret, written
 * `{key}:{hex}` where a client carries them (docs/pusher.md#signatures):
 * - a private channel's authorization signs `{socket_id}:{channel}`;
 * - a presence channel's signs `{socket_id}:{channel}:{channel_data}`, the
 *   channel data exactly as the client sends it;
 * - a sign-in signs `{socket_id}::user::{user_data}`;
 * - a webhook's `X-Pusher-Signature` is the hex of its body.
 * The server SDKs sign these on the app's server; the front door checks them.
 */
import type { PusherApp } from "./settings";
import { hmacHex, sameText } from "./hmac";

/** Whether `auth` (`{key}:{hex}`) is the app's signature of `text`. */
async function signedByApp(app: PusherApp, text: string, auth: string | undefined): Promise<boolean> {
  if (auth === undefined) return false;
  const colon = auth.indexOf(":");
  if (colon < 0 || auth.slice(0, colon) !== app.key) return false;
  return sameText(auth.slice(colon + 1), await hmacHex(app.secret, text));
}

/** Whether `auth` authorizes `socketId` on `channel` (with `channelData`, for a presence channel). */
export function channelAuthorized(app: PusherApp, socketId: string, channel: string, auth: string | undefined, channelData?: string): Promise<boolean> {
  return signedByApp(app, channelData === undefined ? `${socketId}:${channel}` : `${socketId}:${channel}:${channelData}`, auth);
}

/** Whether `auth` signs `socketId` in as the user `userData` describes. */
export function userAuthorized(app: PusherApp, socketId: string, userData: string, auth: string): Promise<boolean> {
  return signedByApp(app, `${socketId}::user::${userData}`, auth);
}

/** The `X-Pusher-Signature` of a webhook body. */
export function pusherWebhookSignature(app: PusherApp, body: string): Promise<string> {
  return hmacHex(app.secret, body);
}
