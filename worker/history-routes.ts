import type { Hono } from "hono";
import { readCoordinatorConfig } from "../common/coordinator-config";
import { shardOf, shardStub } from "../common/coordinator-shards";
import type { FanoutAppEnv } from "./app-env";
import { jsonError } from "./errors";
import { parseHistoryQuery } from "./history-query";

/**
 * `GET /rooms/{room}/messages`: pages of a room's history (docs/history.md).
 * Guarded by the publish key like the other read routes (app.ts registers
 * the guard before this), and it creates nothing: the coordinator's
 * directory is asked first, and the room only reads.
 */
export function registerHistoryRoutes(app: Hono<FanoutAppEnv>): void {
  app.get("/rooms/:room/messages", async (c) => {
    const room = c.get("room");
    const query = parseHistoryQuery(c.req.query());
    if (!query.ok) return jsonError(c, 400, "bad_request", query.message);
    // Instantiating a room that never existed would create its database: ask the directory first.
    const shard = shardStub(c.env.COORDINATOR, shardOf(room, readCoordinatorConfig(c.env).shards));
    if (!(await shard.known(room))) return jsonError(c, 404, "not_found", "no such room: it holds no history");
    const answer = await c.env.ROOMS.get(c.env.ROOMS.idFromName(room)).messages(query.value);
    if (!answer.ok) return jsonError(c, answer.status, answer.error, answer.message);
    return c.body(answer.body, 200, { "content-type": "application/json; charset=utf-8" });
  });

  app.all("/rooms/:room/messages", (c) => jsonError(c, 405, "method_not_allowed", "read history with GET", { Allow: "GET" }));
}
