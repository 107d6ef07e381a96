import type { Context } from "hono";
import { DEMO_HTML, SDK_JS } from "../client-sdk/dist/sdk.generated";

/**
 * The client SDK bundle and a demo page for a room. Both are built into the
 * worker (client-sdk/build.mjs writes them as string constants), so serving
 * them needs no asset storage. The demo page loads the SDK and opens rooms
 * relative to its own URL, so it works wherever the app is mounted.
 */

/** `GET /sdk.js`: the client SDK as an ES module. */
export function serveSdk(c: Context): Response {
  return c.body(SDK_JS, 200, {
    "Content-Type": "text/javascript; charset=utf-8",
    // Short so a deploy's new SDK reaches pages within minutes.
    "Cache-Control": "public, max-age=300",
    "Access-Control-Allow-Origin": "*",
  });
}

/** `GET /demo?room=`: a page that follows a room. */
export function serveDemo(c: Context): Response {
  return c.body(DEMO_HTML, 200, {
    "Content-Type": "text/html; charset=utf-8",
    "Cache-Control": "no-cache",
  });
}
