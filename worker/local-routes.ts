import { Hono } from "hono";
import type { Env } from "./env";
import { jsonError } from "./errors";
import { admissionSnapshot, knownRooms, reportPressure } from "./local-admission";

/**
 * Loopback admin routes used by the local server launcher only. They exist
 * when the launcher set LOCAL_ADMIN_TOKEN (never on Cloudflare) and require it.
 */
export const localRoutes = new Hono<{ Bindings: Env }>();

localRoutes.use("*", async (c, next) => {
  const token = c.env.LOCAL_ADMIN_TOKEN;
  if (!token || c.req.header("x-local-admin-token") !== token) {
    return jsonError(c, 404, "not_found", `no route for ${c.req.method} ${c.req.path}`);
  }
  await next();
});

/** The launcher's descriptor sample; answers the admission count to use as the next basis. */
localRoutes.post("/pressure", async (c) => {
  const sample = await c.req.json<{ fds: number; basis: number; ceiling: number }>();
  return c.json({ admitted: reportPressure(sample) });
});

localRoutes.get("/admission", (c) => c.json(admissionSnapshot()));

/** Closes every socket of every room this process served with 1012, so clients resume elsewhere. */
localRoutes.post("/shutdown", async (c) => {
  const rooms = knownRooms();
  let sockets = 0;
  const results = await Promise.allSettled(
    rooms.map((room) => c.env.ROOMS.get(c.env.ROOMS.idFromName(room)).shutdown()),
  );
  for (const result of results) if (result.status === "fulfilled") sockets += result.value;
  return c.json({ rooms: rooms.length, sockets });
});
