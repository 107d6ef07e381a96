import { CloseCode, closeReason, type ErrorBody } from "../../protocol";
import { REFUSAL_CLOSE_HEADER } from "../../common/edge-requests";
import { FANOUT_SUBPROTOCOL, parseSubprotocolOffer } from "./subprotocol";

/**
 * Refusals of WebSocket upgrades as close codes.
 *
 * A browser's WebSocket reports an upgrade answered with 401 or 403 as a bare
 * 1006 with no status, so a page cannot tell "your token expired" from "the
 * network dropped" and would retry forever. So the worker accepts such an
 * upgrade itself, with a WebSocketPair that never reaches a room, and closes
 * it at once with 4001 or 4003 and the refusal's message as the reason: every
 * WebSocket client sees the code.
 *
 * Clients that would rather read the HTTP status (and its JSON body) send the
 * request header `X-Refusal: http`.
 */

/** Request header that asks for refusals of an upgrade as HTTP statuses instead of close codes. */
export const REFUSAL_HEADER = "x-refusal";
/** The value of REFUSAL_HEADER that asks for HTTP statuses. */
export const HTTP_REFUSALS = "http";

/** What an upgrade asks for, as far as refusing it goes. */
export interface UpgradeRequest {
  method: string;
  headers: Headers;
}

/**
 * Whether a refusal of `request` is answered with a closed socket: it is a
 * WebSocket upgrade (GET with `Upgrade: websocket`; only those can be
 * answered with 101), it did not ask for HTTP statuses, and the answer can
 * select a subprotocol it offered, if it offered any (a browser drops an
 * answer that selects none of its offer before reading a close, so such an
 * upgrade gets the HTTP status).
 */
export function refusesWithClose(request: UpgradeRequest): boolean {
  if (request.method !== "GET") return false;
  if (request.headers.get("upgrade")?.toLowerCase() !== "websocket") return false;
  if (request.headers.get(REFUSAL_HEADER)?.trim().toLowerCase() === HTTP_REFUSALS) return false;
  const offer = parseSubprotocolOffer(request.headers.get("sec-websocket-protocol"));
  return offer.offered.length === 0 || offer.fanout;
}

/** The close code a refusal with HTTP `status` becomes: 401 -> 4001, 403 -> 4003. */
export function refusalCloseCode(status: 401 | 403): number {
  return status === 401 ? CloseCode.UNAUTHORIZED : CloseCode.FORBIDDEN;
}

/**
 * Accepts the upgrade with a socket of the worker's own and closes it at once
 * with `code` and `reason`. The socket never reaches a room: no object is
 * created or woken by a refused client.
 *
 * When the client offered `fanout.v1`, the answer selects it, or a browser
 * would drop the connection before it read the close.
 */
export function closedSocketAnswer(request: UpgradeRequest, code: number, reason: string): Response {
  const pair = new WebSocketPair();
  const client = pair[0];
  const server = pair[1];
  server.accept();
  server.close(code, closeReason(reason));
  const headers = new Headers();
  if (parseSubprotocolOffer(request.headers.get("sec-websocket-protocol")).fanout) {
    headers.set("Sec-WebSocket-Protocol", FANOUT_SUBPROTOCOL);
  }
  return new Response(null, { status: 101, webSocket: client, headers });
}

/**
 * A room's answer to an upgrade, as the client gets it: a refusal the room
 * marked with the close code it stands for (its onConnect hook's) becomes a
 * socket closed with that code, when the client can take one; anything else
 * passes as it is. The marking header never reaches the client.
 */
export async function closeRefusedUpgrade(request: UpgradeRequest, answer: Response): Promise<Response> {
  const close = answer.headers.get(REFUSAL_CLOSE_HEADER);
  if (close === null || answer.status === 101) return answer;
  const headers = new Headers(answer.headers);
  headers.delete(REFUSAL_CLOSE_HEADER);
  if (!refusesWithClose(request)) return new Response(answer.body, { status: answer.status, headers });
  const body = (await answer.json().catch(() => null)) as Partial<ErrorBody> | null;
  return closedSocketAnswer(request, Number(close), typeof body?.message === "string" ? body.message : "refused by the room");
}
