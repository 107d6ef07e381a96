import { Hono } from "hono";
import { DEMO_HTML, SDK_JS } from "../client-sdk/dist/sdk.generated";

/**
 * The client SDK bundle and a demo page for a room. Both are built into the
 * worker (client-sdk/build.mjs writes them as string constants), so serving
 * them needs no asset storage.
 */
export const staticRoutes = new Hono();

staticRoutes.get("/sdk.js", (c) =>
  c.body(SDK_JS, 200, {
    "Content-Type": "text/javascript; charset=utf-8",
    // Short so a deploy's new SDK reaches pages within minutes.
    "Cache-Control": "public, max-age=300",
    "Access-Control-Allow-Origin": "*",
  }),
);

staticRoutes.get("/demo", (c) =>
  c.body(DEMO_HTML, 200, {
    "Content-Type": "text/html; charset=utf-8",
    "Cache-Control": "no-cache",
  }),
);
