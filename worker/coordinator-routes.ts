import { Hono } from "hono";
import { runBroadcast } from "./coordinator/broadcast";
import { readCoordinatorConfig, type CoordinatorConfig } from "../common/coordinator-config";
import { listRooms } from "./coordinator/listing";
import { parseBroadcastBody, parseIdempotencyKey, parseListQuery } from "./coordinator/requests";
import { logEvent } from "../common/log";
import type { Env } from "./env";
import { jsonError } from "./errors";
import { bodyLimits, readBody } from "./request-body";
import { countBroadcast } from "./service-counters";

/** GET /rooms (live-room registry) and POST /broadcast (cross-room fan-out). */
export const coordinatorRoutes = new Hono<{ Bindings: Env }>();

/**
 * Largest broadcast body: the data itself plus an explicit list of the
 * maximum number of the longest names (64 characters, quoted, comma) and
 * some room for the JSON around them.
 */
function maxBroadcastBytes(config: CoordinatorConfig): number {
  return config.maxMessageBytes + config.broadcastMaxRooms * 67 + 1024;
}

coordinatorRoutes.get("/rooms", async (c) => {
  const config = readCoordinatorConfig(c.env);
  const query = parseListQuery({ prefix: c.req.query("prefix"), limit: c.req.query("limit"), cursor: c.req.query("cursor") });
  if (!query.ok) return jsonError(c, query.status, query.error, query.message);
  return c.json(await listRooms(c.env.COORDINATOR, config, query.value));
});

const lenientUtf8 = new TextDecoder();

coordinatorRoutes.post("/broadcast", async (c) => {
  const config = readCoordinatorConfig(c.env);
  // The body is read before anything is refused, so every answer reaches a client still uploading.
  const read = await readBody(c.req.raw, bodyLimits(maxBroadcastBytes(config)));
  if (!read.ok) return jsonError(c, read.status, read.error, read.message);
  const key = parseIdempotencyKey(c.req.header("idempotency-key"));
  if (!key.ok) return jsonError(c, key.status, key.error, key.message);
  const body = parseBroadcastBody(lenientUtf8.decode(read.bytes), config);
  if (!body.ok) return jsonError(c, body.status, body.error, body.message);

  // A generated key still dedupes the service's own retries; the answer
  // carries it so the caller can retry with it too.
  const idempotencyKey = key.value ?? crypto.randomUUID();
  const started = Date.now();
  const result = await runBroadcast(c.env.COORDINATOR, config, body.value.target, body.value.dataJson, idempotencyKey);
  if (!result.duplicate) countBroadcast();
  logEvent("broadcast", {
    key: idempotencyKey,
    target: body.value.target.kind === "rooms" ? `${body.value.target.rooms.length} rooms` : `prefix ${JSON.stringify(body.value.target.prefix)}`,
    rooms: result.rooms,
    sockets: result.sockets,
    duplicates: result.duplicates,
    refused: result.refused,
    failed: result.failedCount,
    failedShards: result.failedShards.length,
    ms: Date.now() - started,
  });
  return c.json(result);
});

coordinatorRoutes.all("/broadcast", (c) => jsonError(c, 405, "method_not_allowed", "broadcast with POST", { Allow: "POST" }));
coordinatorRoutes.on(["POST", "PUT", "PATCH", "DELETE"], "/rooms", (c) =>
  jsonError(c, 405, "method_not_allowed", "list rooms with GET", { Allow: "GET" }),
);
