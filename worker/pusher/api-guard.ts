import { createMiddleware } from "hono/factory";
import { PUSHER_API_MAX_BODY_BYTES, PUSHER_API_PREFIX } from "../../protocol/pusher";
import { pusherSettings, type PusherApp } from "../../common/settings";
import type { FanoutAppEnv } from "../app";
import { jsonError } from "../errors";
import { bodyLimits, readBody } from "../request-body";
import { checkSignedRequest } from "./signed-query";

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
 * app (404 otherwise), the body is at most PUSHER_API_MAX_BODY_BYTES (413)
 * and UTF-8 (400), and the request is signed by the app's secret (401:
 * signed-query.ts). The body is read before the signature is checked, since
 * `body_md5` signs it; the read is bounded, so an unsigned upload costs no more
 * than a signed one.
 */
export const pusherApiGuard = createMiddleware<PusherApiEnv>(async (c, next) => {
  const settings = pusherSettings(c.env);
  if (settings.app === null) return jsonError(c, 404, "not_found", `the Pusher HTTP API is off: ${settings.off}`, undefined, "pusher_off");
  const app = settings.app;
  if (c.req.param("appId") !== app.id) return jsonError(c, 404, "not_found", "no app with this id", undefined, "unknown_app_id");

  let body: Uint8Array = new Uint8Array(0);
  if (c.req.method !== "GET" && c.req.method !== "HEAD") {
    const read = await readBody(c.req.raw, bodyLimits(PUSHER_API_MAX_BODY_BYTES));
    if (!read.ok) return jsonError(c, read.status, read.error, read.message);
    body = read.bytes;
  }
  let text: string;
  try {
    text = utf8.decode(body);
  } catch {
    return jsonError(c, 400, "bad_request", "the body must be UTF-8 JSON");
  }

  const url = new URL(c.req.url);
  // The SDKs sign the path from /apps/ on: a worker that mounts this app under a prefix keeps it out.
  const path = url.pathname.slice(url.pathname.indexOf(`${PUSHER_API_PREFIX}${app.id}/`));
  const checked = await checkSignedRequest(app, { method: c.req.method, path, query: url.search.slice(1), body }, Date.now());
  if (!checked.ok) return jsonError(c, checked.status, checked.error, checked.message, undefined, checked.status === 401 ? "pusher_signature" : checked.error);

  c.set("pusherApp", app);
  c.set("pusherBody", text);
  c.set("pusherParams", checked.params);
  await next();
});
