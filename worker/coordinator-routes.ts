import { Hono } from "hono";
import type { Env } from "./env";

/** GET /rooms (live-room registry) and POST /broadcast (cross-room fan-out). */
export const coordinatorRoutes = new Hono<{ Bindings: Env }>();
