import { Hono, type Context } from "hono";
import { isValidRoomName, MULTIPLEX_PATH, resumeProblem, type PublishAnswer } from "../protocol";
import { readLimits, type Limits } from "../common/settings";
import { logEvent } from "../common/log";
import { utf8Length } from "../common/utf8";
import { recordPublish } from "./analytics";
import { connectionAccess, forwardedHeaders, requirePublishKey, subscribeAccess, warnWhenOpen } from "./auth";
import type { Env } from "./env";
import type { FanoutAppEnv } from "./app-env";

export type { FanoutAppEnv } from "./app-env";
import { jsonError, refusedPublish } from "./errors";
import { coordinatorRoutes } from "./coordinator-routes";
import { localRoutes } from "./local-routes";
import { metricsRoutes } from "./metrics";
import { flushServiceCountersSoon } from "./service-counters";
import { serveDemo, serveSdk } from "./static";
import { admitSocket, noteHub } from "./local-admission";
import { decodePublishBody } from "./publish-body";
import { readCoordinatorConfig } from "../common/coordinator-config";
import { shardOf, shardStub } from "../common/coordinator-shards";
import { bodyLimits, readBody } from "./request-body";
import { parsePresencePage } from "./presence-query";
import { registerHistoryRoutes } from "./history-routes";
import { rewindProblem } from "./rewind-query";
import { openRoomSocket } from "./placement";
import { openConnection } from "./hub-placement";
import { closeRefusedUpgrade } from "./auth/socket-refusal";
import { parseIdempotencyKey } from "./coordinator/requests";
import { PUSHER_SOCKET_PREFIX } from "../protocol/pusher";
import { pusherSocket } from "./pusher/socket-route";
import { pusherApi } from "./pusher/api-routes";


/**
 * Choices for `createFanoutApp`: which of the service's own pages it serves.
 *
 * @see docs/library.md#build-run-connect
 */
export interface FanoutAppOptions {
  /**
   * Serve the client SDK bundle at `GET /sdk.js`.
   * @default true
   */
  sdk?: boolean;
  /**
   * Serve the demo page at `GET /demo?room=` (it needs `sdk`).
   * @default true
   */
  demo?: boolean;
}

/**
 * The local server's admission of one more socket (a room's, or a multiplexed
 * connection's: `room` null): a 503 when it is shutting down or at its
 * descriptor ceiling (local-admission.ts), else null.
 */
function admissionRefusal(c: Context<FanoutAppEnv>, room: string | null): Response | null {
  const admission = admitSocket(room, c.env.LOCAL_ADMIN_TOKEN !== undefined);
  if (admission === "draining") {
    // Accepting now would only hand the client a socket that dies with the process.
    logEvent("refusal", { room, reason: "shutting_down" });
    return jsonError(c, 503, "over_capacity", "the server is shutting down; reconnect in a few seconds", { "Retry-After": "2" }, "shutting_down");
  }
  if (admission === "over_capacity") {
    logEvent("refusal", { room, reason: "over_capacity" });
    return jsonError(c, 503, "over_capacity", "the server is at its connection ceiling; retry later", { "Retry-After": "5" });
  }
  return null;
}

/** Whether a worker's environment has the bindings the app calls (a mounted app may have been forgotten in wrangler.toml). */
function hasBindings(env: Env | undefined): env is Env {
  return typeof env?.ROOMS?.idFromName === "function" && typeof env.COORDINATOR?.idFromName === "function";
}

const limitsCache = new WeakMap<object, Limits>();

function limitsOf(env: Env): Limits {
  let limits = limitsCache.get(env);
  if (!limits) {
    limits = readLimits(env);
    limitsCache.set(env, limits);
  }
  return limits;
}

/**
 * Makes the service's HTTP front: every route of docs/protocol.md (sockets,
 * publishing, stats, presence, listing, broadcast, metrics), with access
 * control (docs/security.md). Mount it where you like in a worker of your
 * own; its bindings must be there: `ROOMS` (a `Room` class, or your subclass
 * of it) and `COORDINATOR` (`Coordinator`), with SQLite storage.
 *
 * @param [options={}] which of the service's own pages to serve (`/sdk.js`, `/demo`).
 * @returns a Hono app to mount with `app.route(path, ...)`; a request it gets
 * without the `ROOMS` or `COORDINATOR` binding is answered 500 `internal`.
 *
 * @example
 * ```ts
 * import { Hono } from "hono";
 * import { createFanoutApp, type FanoutEnv } from "edge-fanout";
 * // The classes the bindings name (ROOMS, COORDINATOR, HUBS) are exports of the worker.
 * export { Room, Coordinator, RoomHub } from "edge-fanout";
 *
 * const app = new Hono<{ Bindings: FanoutEnv }>();
 * app.get("/", (c) => c.text("my own routes"));
 * app.route("/realtime", createFanoutApp({ demo: false }));
 * export default app;
 * ```
 *
 * @see docs/library.md
 */
export function createFanoutApp(options: FanoutAppOptions = {}): Hono<FanoutAppEnv> {
  const app = new Hono<FanoutAppEnv>();

  app.onError((error, c) => {
    logEvent("error", { path: c.req.path, error: String(error), stack: error instanceof Error ? error.stack : undefined });
    return jsonError(c, 500, "internal", "internal error");
  });

  app.notFound((c) => jsonError(c, 404, "not_found", `no route for ${c.req.method} ${c.req.path}`));

  app.use("*", async (c, next) => {
    if (!hasBindings(c.env)) {
      logEvent("bad_config", { problem: "missing_bindings", need: "ROOMS (a Room class) and COORDINATOR (Coordinator) Durable Object bindings" });
      return jsonError(c, 500, "internal", "the service is missing its ROOMS or COORDINATOR binding");
    }
    c.set("limits", limitsOf(c.env));
    await next();
    // Hono throws when there is no execution context (the app called directly, as tests do);
    // then the counts simply wait for a request that has one.
    let ctx: ExecutionContext | undefined;
    try {
      ctx = c.executionCtx;
    } catch {
      ctx = undefined;
    }
    if (ctx) flushServiceCountersSoon(c.env, ctx);
  });

  // Access control runs before the routes it guards (docs/security.md).
  app.use("*", warnWhenOpen());
  app.use("/rooms/:room/publish", requirePublishKey());
  app.use("/broadcast", requirePublishKey());
  // The listing names every live room and the stats tell who is connected where: as private as publishing.
  app.use("/rooms", requirePublishKey());
  app.use("/rooms/:room", requirePublishKey());
  app.use("/rooms/:room/presence", requirePublishKey());
  app.use("/rooms/:room/messages", requirePublishKey());
  app.use("/metrics", requirePublishKey());
  app.use("/rooms/:room/ws", subscribeAccess());
  app.use(MULTIPLEX_PATH, connectionAccess());

  app.get("/healthz", (c) => c.json({ ok: true }));

  // One connection that follows many rooms (docs/multiplexing.md).
  app.get(MULTIPLEX_PATH, async (c) => {
    if (c.req.header("upgrade")?.toLowerCase() !== "websocket") {
      return jsonError(c, 426, "upgrade_required", "this endpoint takes a WebSocket upgrade", { Upgrade: "websocket" });
    }
    const refused = admissionRefusal(c, null);
    if (refused) return refused;
    const hubs = c.env.HUBS;
    if (!hubs) return jsonError(c, 404, "not_found", "this service has no multiplexed connections (no HUBS binding)");
    const { answer, hub } = await openConnection({ kind: "hub", namespace: hubs, count: c.get("limits").MULTIPLEX_HUBS }, c.req.url, forwardedHeaders(c));
    if (hub !== null && c.env.LOCAL_ADMIN_TOKEN !== undefined) noteHub(hub);
    return answer;
  });
  app.all(MULTIPLEX_PATH, (c) => jsonError(c, 405, "method_not_allowed", "connect with GET and an Upgrade header", { Allow: "GET" }));

  // The Pusher front door (docs/pusher.md): stock Pusher clients connect here.
  app.get(`${PUSHER_SOCKET_PREFIX}:key`, (c) => pusherSocket(c, (c) => admissionRefusal(c, null)));
  // Pusher's HTTP API, for the server SDKs: signed with the app's secret, not the publish key.
  app.route("/apps", pusherApi);

  app.route("/__local", localRoutes);
  if (options.sdk !== false) app.get("/sdk.js", serveSdk);
  if (options.demo !== false) app.get("/demo", serveDemo);
  app.route("/", metricsRoutes);
  app.route("/", coordinatorRoutes);

  // Every /rooms/:room route validates the name once, here.
  app.use("/rooms/:room/*", async (c, next) => {
    const room = c.req.param("room");
    if (!isValidRoomName(room)) {
      return jsonError(c, 400, "bad_room", "room names are 1-64 characters: letters, digits and . _ : ~ - (not first)");
    }
    c.set("room", room);
    await next();
  });

  app.get("/rooms/:room/ws", async (c) => {
    const room = c.get("room");
    if (c.req.header("upgrade")?.toLowerCase() !== "websocket") {
      return jsonError(c, 426, "upgrade_required", "this endpoint takes a WebSocket upgrade", { Upgrade: "websocket" });
    }
    const query = new URL(c.req.url).searchParams;
    const resume = resumeProblem(query) ?? rewindProblem(room, query, c.env);
    if (resume !== null) return jsonError(c, 400, "bad_request", resume);
    const refused = admissionRefusal(c, room);
    if (refused) return refused;
    // The room's own object, or one of its leaves once it is sharded (docs/sharded-rooms.md).
    const answer = await openRoomSocket(c.env, room, c.req.url, forwardedHeaders(c));
    // A room's onConnect refusal reaches a browser as the close code it can see.
    return closeRefusedUpgrade(c.req.raw, answer);
  });

  app.post("/rooms/:room/publish", async (c) => {
    const room = c.get("room");
    const key = parseIdempotencyKey(c.req.header("idempotency-key"));
    if (!key.ok) return jsonError(c, key.status, key.error, key.message);
    const maxBytes = c.get("limits").MAX_MESSAGE_BYTES;
    const read = await readBody(c.req.raw, bodyLimits(maxBytes));
    if (!read.ok) return jsonError(c, read.status, read.error, read.message);
    const body = decodePublishBody(read.bytes, c.req.header("content-type") ?? null, maxBytes);
    if (!body.ok) return jsonError(c, body.status, body.error, body.message);
    const stub = c.env.ROOMS.get(c.env.ROOMS.idFromName(room));
    // A retry with the same key is answered with the first publish's seq (docs/history.md#idempotent-publishes).
    const result = await stub.publish(body.dataJson, key.value === null ? {} : { retryKey: key.value });
    // The room counted the refusal (a conflicting key's too); it is answered here without counting it twice.
    if ("refused" in result) return refusedPublish(c, result.refused);
    if (result.duplicate) return c.json({ room, seq: result.seq, recipients: 0, duplicate: true } satisfies PublishAnswer);
    recordPublish(c.env, room, result.recipients, utf8Length(body.dataJson));
    return c.json({ room, seq: result.seq, recipients: result.recipients } satisfies PublishAnswer);
  });

  app.all("/rooms/:room/publish", (c) => jsonError(c, 405, "method_not_allowed", "publish with POST", { Allow: "POST" }));
  app.all("/rooms/:room/ws", (c) => jsonError(c, 405, "method_not_allowed", "connect with GET and an Upgrade header", { Allow: "GET" }));

  app.get("/rooms/:room", async (c) => {
    const room = c.get("room");
    // Instantiating a room that never existed would create its database: ask the directory first.
    const shard = shardStub(c.env.COORDINATOR, shardOf(room, readCoordinatorConfig(c.env).shards));
    if (!(await shard.known(room))) return jsonError(c, 404, "not_found", "no such room: it holds no history and no sockets");
    const stub = c.env.ROOMS.get(c.env.ROOMS.idFromName(room));
    return c.json(await stub.stats());
  });

  app.get("/rooms/:room/presence", async (c) => {
    const room = c.get("room");
    const page = parsePresencePage(c.req.query("limit"), c.req.query("cursor"));
    if (!page.ok) return jsonError(c, 400, "bad_request", page.message);
    const shard = shardStub(c.env.COORDINATOR, shardOf(room, readCoordinatorConfig(c.env).shards));
    if (!(await shard.known(room))) return jsonError(c, 404, "not_found", "no such room: it holds no history and no sockets");
    const stub = c.env.ROOMS.get(c.env.ROOMS.idFromName(room));
    return c.json(await stub.presence(page.limit, page.cursor));
  });

  app.all("/rooms/:room/presence", (c) => jsonError(c, 405, "method_not_allowed", "read presence with GET", { Allow: "GET" }));

  registerHistoryRoutes(app);

  return app;
}
