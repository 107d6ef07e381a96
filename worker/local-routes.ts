import { Hono } from "hono";
import type { Env } from "./env";
import { jsonError } from "./errors";
import { parseHubName } from "../common/followers";
import { admissionSnapshot, beginDrain, knownHubs, knownRooms, reportPressure } from "./local-admission";

/** Header that carries LOCAL_ADMIN_TOKEN; the local server sets it on its private admin socket only. */
export const LOCAL_ADMIN_HEADER = "x-local-admin-token";

/**
 * Admin routes for the local server launcher. They exist when the launcher set
 * LOCAL_ADMIN_TOKEN (never on Cloudflare) and answer only requests carrying it.
 * The launcher's workerd config injects the header on a Unix socket in a
 * private directory and strips it from every request on the public socket, so
 * these routes cannot be reached from the network even with the token.
 */
export const localRoutes = new Hono<{ Bindings: Env }>();

localRoutes.use("*", async (c, next) => {
  const token = c.env.LOCAL_ADMIN_TOKEN;
  if (!token || c.req.header(LOCAL_ADMIN_HEADER) !== token) {
    return jsonError(c, 404, "not_found", `no route for ${c.req.method} ${c.req.path}`);
  }
  await next();
});

/** Readiness, with the launcher's per-start id: proves the answer comes from the workerd it started. */
localRoutes.get("/health", (c) => c.json({ ok: true, startId: typeof c.env.LOCAL_START_ID === "string" ? c.env.LOCAL_START_ID : null }));

/** The launcher's descriptor sample; answers the admission count to use as the next basis. */
localRoutes.post("/pressure", async (c) => {
  const sample = await c.req.json<{ fds: number; basis: number; ceiling: number }>();
  return c.json({ admitted: reportPressure(sample) });
});

localRoutes.get("/admission", (c) => c.json(admissionSnapshot()));

/** Aborts one leaf of a sharded room as a crash would (fault tests): `{"room", "index"}`. */
localRoutes.post("/leaf-abort", async (c) => {
  const { room, index } = await c.req.json<{ room: string; index: number }>();
  if (typeof room !== "string" || !Number.isSafeInteger(index)) return jsonError(c, 400, "bad_request", "room and index");
  const aborted = await c.env.ROOMS.get(c.env.ROOMS.idFromName(room)).abortLeaf(index);
  return c.json({ aborted });
});

/**
 * Refuses every further upgrade (503, Retry-After), then closes every socket of
 * every room this process served with 1012, so clients resume elsewhere. The
 * launcher calls it twice: the second pass closes sockets whose upgrade was
 * already past admission when the first ran.
 */
localRoutes.post("/shutdown", async (c) => {
  beginDrain();
  // Every room and hub that took sockets in this process is asked; only those that still held some count.
  const closed = async (objects: Promise<number>[]) => (await Promise.allSettled(objects)).map((r) => (r.status === "fulfilled" ? r.value : 0)).filter((n) => n > 0);
  const hubs = knownHubs().flatMap((name) => {
    const namespace = parseHubName(name)?.kind === "pusher" ? c.env.PUSHER_HUBS : c.env.HUBS;
    return namespace ? [namespace.get(namespace.idFromName(name))] : [];
  });
  const [rooms, hubsClosed] = await Promise.all([
    closed(knownRooms().map((room) => c.env.ROOMS.get(c.env.ROOMS.idFromName(room)).shutdown())),
    closed(hubs.map((hub) => hub.shutdown(1012, "service restart"))),
  ]);
  const sockets = [...rooms, ...hubsClosed].reduce((sum, n) => sum + n, 0);
  return c.json({ sockets, rooms: rooms.length, hubs: hubsClosed.length });
});
