import { logEvent } from "../../common/log";
import type { MiddlewareHandler } from "hono";
import { accessSettings, webhookSettings, type AccessSettings } from "../../common/settings";

/** What is open to anyone under `settings`; empty when every check is configured. `webhooks`: whether WEBHOOK_URL is set. */
export function openModeGaps(settings: AccessSettings, webhooks = false): string[] {
  const gaps: string[] = [];
  if (settings.publishKey === null) {
    gaps.push("PUBLISH_KEY is not set: anyone can publish (POST /rooms/:room/publish, /broadcast), list rooms, read their stats, members and history (GET /rooms, /rooms/:room, /rooms/:room/presence, /rooms/:room/messages) and read /metrics");
  }
  if (settings.tokenSecret === null) {
    gaps.push("TOKEN_SECRET is not set: anyone can open sockets on any room and publish over them");
  }
  if (webhooks && settings.webhookSecret === null) {
    gaps.push("WEBHOOK_URL is set without WEBHOOK_SECRET: webhook requests are not signed, and a receiver cannot tell them from anyone's");
  }
  return gaps;
}

let warned = false;

/** What the open-mode line says first, before the gaps. */
const OPEN_MODE_WARNING = "!!! ACCESS CONTROL IS OFF !!! Fine for local development; set the secrets before exposing this service (docs/security.md)";

/**
 * Warns once per isolate, on its first request, when access control is off:
 * one log line, like every log of the service (its `warning` says it loudly,
 * its `gaps` what is open). The local server's start-up health check is that
 * first request, so the warning prints as the server starts; on Cloudflare it
 * shows in `wrangler tail` after each deploy or isolate start.
 */
export function warnWhenOpen(): MiddlewareHandler {
  return async (c, next) => {
    if (!warned) {
      warned = true;
      const env = c.env as Record<string, unknown>;
      const gaps = openModeGaps(accessSettings(env), webhookSettings(env) !== null);
      if (gaps.length > 0) logEvent("open_mode", { warning: OPEN_MODE_WARNING, gaps });
    }
    return next();
  };
}
