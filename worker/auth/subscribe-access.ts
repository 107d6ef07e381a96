import type { Context, MiddlewareHandler } from "hono";
import { CAN_PUBLISH_HEADER, EDGE_HEADERS, encodeGrants, GRANTS_HEADER, TOKEN_EXPIRES_HEADER } from "../../common/edge-requests";
import { jsonError } from "../errors";
import { memberVerdict } from "./member-identity";
import { originAllowed } from "./origins";
import { refuseUpgrade } from "./refusal";
import { accessSettings } from "../../common/settings";
import { FANOUT_SUBPROTOCOL, parseSubprotocolOffer } from "./subprotocol";
import { accessTo, grantsOf, verifyToken, type SubscribeClaims } from "../../common/tokens";
import { isPrivatePusherRoom } from "../../protocol/pusher";

/** What the access check leaves the route: the headers it forwards the upgrade with. */
export type ForwardEnv = { Variables: { forwardHeaders: Headers } };

/**
 * Sets the headers the route forwards the upgrade with: the client's, less
 * any edge header it sent itself, plus the edge's verdict. At most one copy,
 * made here and handed over (an upgrade is on the hot path of every
 * connect), and none when there is nothing to take out or add (open mode, no
 * member). The request itself keeps what the client sent, so a route
 * forwards `forwardedHeaders(c)`, never `c.req.raw.headers`.
 */
function forwardWith(c: Context, set: Record<string, string>): void {
  const raw = c.req.raw.headers;
  if (Object.keys(set).length === 0 && !EDGE_HEADERS.some((name) => raw.has(name))) {
    (c as Context<ForwardEnv>).set("forwardHeaders", raw);
    return;
  }
  const headers = new Headers(raw);
  for (const name of EDGE_HEADERS) headers.delete(name);
  for (const [name, value] of Object.entries(set)) headers.set(name, value);
  (c as Context<ForwardEnv>).set("forwardHeaders", headers);
}

/** The headers an upgrade that passed its access check is forwarded with (possibly the request's own, which cannot change: copy to change them). */
export function forwardedHeaders(c: Context): Headers {
  const headers = (c as Context<ForwardEnv>).get("forwardHeaders") as Headers | undefined;
  // Forwarding the client's own headers would let it claim the edge's verdict: never fall back to them.
  if (headers === undefined) throw new Error("an upgrade is forwarded only after its access check");
  return headers;
}

/**
 * Selects `fanout.v1` in the 101 answer. The room answers without a
 * subprotocol, and a browser that offered some drops a connection whose
 * answer selects none.
 */
function selectSubprotocol(c: Context): void {
  const res = c.res;
  if (res.status !== 101 || !res.webSocket) return;
  const headers = new Headers(res.headers);
  headers.set("Sec-WebSocket-Protocol", FANOUT_SUBPROTOCOL);
  const upgraded = new Response(null, { status: 101, webSocket: res.webSocket, headers });
  // Clearing first keeps Hono from re-wrapping the answer (which would lose the socket).
  c.res = undefined;
  c.res = upgraded;
}

/**
 * Guards `GET /rooms/:room/ws`:
 * 1. the `Origin` must be on ALLOWED_ORIGINS when that list is set (4003/403);
 * 2. a subprotocol offer must include `fanout.v1` (400);
 * 3. with TOKEN_SECRET set, a valid token for the room is required, from
 *    `?token=` or a `token.<jwt>` subprotocol (4001/401 missing, invalid or
 *    expired; 4003/403 other room).
 * An upgrade refused for its origin or token is accepted and closed at once
 * with the close code, so browsers see why; `X-Refusal: http` asks for the
 * HTTP status instead (refusal.ts).
 * The verdict reaches the room in edge-only headers: whether the socket may
 * publish, when its token expires (the room closes it with 4001 then), and
 * who it is in the room's presence (member-identity.ts; a bad `?info=` is 400).
 * With no TOKEN_SECRET the socket is open and may publish.
 */
export function subscribeAccess(): MiddlewareHandler {
  return socketAccess("room");
}

/**
 * Guards `GET /ws`, the multiplexed connection, as `subscribeAccess` guards a
 * room's socket, except that no room is named yet: a valid token is required
 * (with TOKEN_SECRET set) and its grants travel to the connection's object in
 * an edge header (GRANTS_HEADER), which checks every subscribe against them.
 * Without TOKEN_SECRET the connection may follow and publish into any room.
 */
export function connectionAccess(): MiddlewareHandler {
  return socketAccess("connection");
}

function socketAccess(kind: "room" | "connection"): MiddlewareHandler {
  return async (c, next) => {
    const settings = accessSettings(c.env as Record<string, unknown>);
    const room = kind === "room" ? (c.req.param("room") ?? "") : undefined;

    if (!originAllowed(c.req.header("origin"), settings.allowedOrigins)) {
      return refuseUpgrade(c, "origin_not_allowed", "this origin may not open sockets", { room });
    }
    const offer = parseSubprotocolOffer(c.req.header("sec-websocket-protocol"));
    if (offer.offered.length > 0 && !offer.fanout) {
      return refuseUpgrade(c, "bad_subprotocol", `offer the ${FANOUT_SUBPROTOCOL} subprotocol (a token goes alongside it as token.<jwt>)`, { room });
    }

    let verdict: Record<string, string> = {};
    let claims: SubscribeClaims | null = null;
    // Open mode opens every room but those of channels Pusher keeps private: a token that grants one opens it.
    if (settings.tokenSecret === null && room !== undefined && isPrivatePusherRoom(room)) {
      return refuseUpgrade(c, "room_not_allowed", "a private Pusher channel's room needs a token that grants it: set TOKEN_SECRET", { room });
    }
    if (settings.tokenSecret !== null) {
      const token = c.req.query("token") ?? offer.token;
      if (token === null || token === "") {
        return refuseUpgrade(c, "missing_token", "a token is required: ?token=<jwt> or subprotocol token.<jwt>", { room });
      }
      const check = await verifyToken(token, settings.tokenSecret);
      if (!check.ok) return refuseUpgrade(c, check.reason, check.message, { room });
      const grants = grantsOf(check.claims);
      if (room !== undefined) {
        const access = accessTo(grants, room);
        if (access === null) return refuseUpgrade(c, "room_not_allowed", "the token does not open this room", { room, subject: check.claims.sub });
        verdict[CAN_PUBLISH_HEADER] = access.pub ? "true" : "false";
      } else {
        verdict[GRANTS_HEADER] = encodeGrants(grants);
      }
      // Past the largest safe integer the room would ignore it; such a token never expires in practice anyway.
      verdict[TOKEN_EXPIRES_HEADER] = String(Math.min(Math.floor(check.claims.exp * 1000), Number.MAX_SAFE_INTEGER));
      claims = check.claims;
    }
    const member = memberVerdict(claims, new URL(c.req.url).searchParams);
    if (!member.ok) return jsonError(c, 400, "bad_request", member.message);
    verdict = { ...verdict, ...member.headers };
    forwardWith(c, verdict);

    await next();
    if (offer.fanout) selectSubprotocol(c);
  };
}
