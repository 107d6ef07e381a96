import type { Context } from "hono";
import type { ErrorCode } from "../../protocol";
import { logEvent } from "../../common/log";
import { jsonError } from "../errors";
import { countRefusal } from "../service-counters";
import { closedSocketAnswer, refusalCloseCode, refusesWithClose } from "./socket-refusal";

/**
 * Why access was refused. Each reason has one status and one error code, so a
 * client can tell "send credentials" (401) from "these credentials do not
 * allow this" (403) without parsing messages.
 */
export type RefusalReason =
  | "missing_key"
  | "bad_key"
  | "missing_token"
  | "bad_token"
  | "expired_token"
  | "room_not_allowed"
  | "origin_not_allowed"
  | "bad_subprotocol";

const ANSWERS: Readonly<Record<RefusalReason, { status: 400 | 401 | 403; error: ErrorCode }>> = {
  missing_key: { status: 401, error: "unauthorized" },
  bad_key: { status: 401, error: "unauthorized" },
  missing_token: { status: 401, error: "unauthorized" },
  bad_token: { status: 401, error: "unauthorized" },
  expired_token: { status: 401, error: "unauthorized" },
  room_not_allowed: { status: 403, error: "forbidden" },
  origin_not_allowed: { status: 403, error: "forbidden" },
  bad_subprotocol: { status: 400, error: "bad_request" },
};

/** Status and error code a refusal with `reason` is answered with. */
export function refusalAnswer(reason: RefusalReason): { status: 400 | 401 | 403; error: ErrorCode } {
  return ANSWERS[reason];
}

/** Room names in logs come from untrusted URLs; keep them bounded. */
function loggableRoom(room: string | undefined): string | null {
  if (room === undefined || room === "") return null;
  return room.length > 80 ? `${room.slice(0, 80)}…` : room;
}

function logRefusal(c: Context, reason: RefusalReason, details: { room?: string; subject?: string }, close?: number): void {
  const fields: Record<string, unknown> = { room: loggableRoom(details.room), reason, path: c.req.path };
  if (details.subject !== undefined) fields.sub = details.subject;
  if (close !== undefined) fields.close = close;
  logEvent("refusal", fields);
}

/**
 * Answers a refused request with its status and JSON error, and writes one
 * structured `refusal` log line. Every access-control refusal goes through
 * here or through `refuseUpgrade`.
 */
export function refuse(
  c: Context,
  reason: RefusalReason,
  message: string,
  details: { room?: string; subject?: string } = {},
): Response {
  const { status, error } = ANSWERS[reason];
  logRefusal(c, reason, details);
  // RFC 6750: a 401 names the scheme to use, and says whether the credentials sent were bad.
  const missing = reason === "missing_key" || reason === "missing_token";
  const headers: Record<string, string> | undefined =
    status === 401 ? { "WWW-Authenticate": missing ? `Bearer realm="fanout"` : `Bearer realm="fanout", error="invalid_token"` } : undefined;
  return jsonError(c, status, error, message, headers, reason);
}

/**
 * Refuses a request to a room's WebSocket endpoint. A WebSocket upgrade
 * refused for its credentials or origin (401/403) is answered with a socket
 * closed at once with 4001/4003, the code a browser can see
 * (socket-refusal.ts), unless it asked for `X-Refusal: http`. Anything else
 * (a 400, a request that is not an upgrade) is answered as `refuse` does.
 */
export function refuseUpgrade(
  c: Context,
  reason: RefusalReason,
  message: string,
  details: { room?: string; subject?: string } = {},
): Response {
  const { status } = ANSWERS[reason];
  if (status === 400 || !refusesWithClose(c.req.raw)) return refuse(c, reason, message, details);
  const code = refusalCloseCode(status);
  logRefusal(c, reason, details, code);
  countRefusal(reason);
  return closedSocketAnswer(c.req.raw, code, message);
}
