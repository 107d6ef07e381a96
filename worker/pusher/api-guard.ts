import { createMiddleware } from "hono/factory";
import { PUSHER_API_MAX_BODY_BYTES, PUSHER_API_PREFIX } from "../../protocol/pusher";
import { pusherSettings, type PusherApp } from "../../common/settings";
import type { Context } from "hono";
import type { FanoutAppEnv } from "../app-env";
import { jsonError } from "../errors";
import { bodyLimits, readBody } from "../request-body";
import { checkBodyMd5, checkSignedQuery, type Refusal } from "./signed-query";

/** The HTTP API's Hono environment: the app's, and what the guard hands the routes. */
export type PusherApiEnv = {
  Bindings: FanoutAppEnv["Bindings"];
  Variables: FanoutAppEnv["Variables"] & {
    /** The app the request is for, its signature checked. */
    pusherApp: PusherApp;
    /** The body's text (empty for a GET). */
    pusherBody: string;
    /** The query's parameters, keys lower-cased, values decoded. */
    pusherParams: ReadonlyMap<string, string>;
  };
};

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });

/**
 * What every request of the HTTP API passes before its route
 * (docs/pusher.md#the-http-api): the front door is on and the path names its
 * app (404 otherwise); the query is signed by the app's secret (401:
 * signed-query.ts), before the body is read; the body is at most
 * PUSHER_API_MAX_BODY_BYTES (413), the one `body_md5` names (401), and UTF-8
 * (400).
 */
export const pusherApiGuard = createMiddleware<PusherApiEnv>(async (c, next) => {
  const settings = pusherSettings(c.env);
  if (settings.app === null) return jsonError(c, 404, "not_found", `the Pusher HTTP API is off: ${settings.off}`, undefined, "pusher_off");
  const app = settings.app;
  if (c.req.param("appId") !== app.id) return jsonError(c, 404, "not_found", "no app with this id", undefined, "unknown_app_id");

  const url = new URL(c.req.url);
  // The SDKs sign the path from /apps/ on: a worker that mounts this app under a prefix keeps it out.
  const path = url.pathname.slice(url.pathname.indexOf(`${PUSHER_API_PREFIX}${app.id}/`));
  const checked = await checkSignedQuery(app, { method: c.req.method, path, query: url.search.slice(1) }, Date.now());
  if (!checked.ok) return refuse(c, checked);

  let body: Uint8Array = new Uint8Array(0);
  if (c.req.method !== "GET" && c.req.method !== "HEAD") {
    const read = await readBody(c.req.raw, bodyLimits(PUSHER_API_MAX_BODY_BYTES));
    if (!read.ok) return jsonError(c, read.status, read.error, read.message);
    body = read.bytes;
  }
  const bodyRefused = await checkBodyMd5(checked.params, body);
  if (bodyRefused) return refuse(c, bodyRefused);
  let text: string;
  try {
    text = utf8.decode(body);
  } catch {
    return jsonError(c, 400, "bad_request", "the body must be UTF-8 JSON");
  }

  c.set("pusherApp", app);
  c.set("pusherBody", text);
  c.set("pusherParams", checked.params);
  await next();
});

/** A refusal of the signature (counted as `pusher_signature`) or of the query. */
function refuse(c: Context, refusal: Refusal): Response {
  return jsonError(c, refusal.status, refusal.error, refusal.message, undefined, refusal.status === 401 ? "pusher_signature" : refusal.error);
}
