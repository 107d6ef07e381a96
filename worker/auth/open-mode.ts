import { logEvent } from "../../common/log";
import type { MiddlewareHandler } from "hono";
import { accessSettings, type AccessSettings } from "../../common/settings";

/** What is open to anyone under `settings`; empty when every check is configured. */
export function openModeGaps(settings: AccessSettings): string[] {
  const gaps: string[] = [];
  if (settings.publishKey === null) {
    gaps.push("PUBLISH_KEY is not set: anyone can publish (POST /rooms/:room/publish, /broadcast), list rooms, read their stats, members and history (GET /rooms, /rooms/:room, /rooms/:room/presence, /rooms/:room/messages) and read /metrics");
  }
  if (settings.tokenSecret === null) {
    gaps.push("TOKEN_SECRET is not set: anyone can open sockets on any room and publish over them");
  }
  return gaps;
}

let warned = false;

/**
 * Warns once per isolate, on its first request, when access control is off.
 * The local server's start-up health check is that first request, so the
 * warning prints as the server starts; on Cloudflare it shows in
 * `wrangler tail` after each deploy or isolate start.
 */
export function warnWhenOpen(): MiddlewareHandler {
  return async (c, next) => {
    if (!warned) {
      warned = true;
      const gaps = openModeGaps(accessSettings(c.env as Record<string, unknown>));
      if (gaps.length > 0) {
        logEvent("open_mode", { gaps });
        console.warn(
          [
            "",
            "!!! ACCESS CONTROL IS OFF !!!",
            ...gaps.map((g) => `!!! ${g}`),
            "!!! Fine for local development; set the secrets before exposing this service (docs/security.md).",
            "",
          ].join("\n"),
        );
      }
    }
    return next();
  };
}
