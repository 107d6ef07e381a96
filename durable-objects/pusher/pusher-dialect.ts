import { CloseCode } from "../../protocol";
import { PUSHER_ACTIVITY_TIMEOUT_SECONDS, PUSHER_PING, PUSHER_PONG, PusherCloseCode } from "../../protocol/pusher";
import type { SocketDialect } from "../engine/socket-engine";
import type { SocketState } from "../engine/socket-state";

/**
 * Pusher's close code for each of the engine's (CloseCode): a restart, a
 * deploy, an internal error or a move is "reconnect now" (4200), overload and
 * a slow reader "back off" (4100), silence "pong not received" (4201), and a
 * client that does not speak the protocol as a client library does is told to
 * stop (4009). A code not in the table reconnects: a client never stops for a
 * reason it cannot name.
 */
const CLOSE_CODES: Readonly<Record<number, number>> = {
  [CloseCode.NORMAL]: CloseCode.NORMAL,
  [CloseCode.GOING_AWAY]: PusherCloseCode.RECONNECT,
  [CloseCode.MESSAGE_TOO_BIG]: PusherCloseCode.UNAUTHORIZED,
  [CloseCode.INTERNAL_ERROR]: PusherCloseCode.RECONNECT,
  [CloseCode.SERVICE_RESTART]: PusherCloseCode.RECONNECT,
  [CloseCode.TRY_AGAIN_LATER]: PusherCloseCode.OVER_CAPACITY,
  [CloseCode.BAD_FRAME]: PusherCloseCode.UNAUTHORIZED,
  [CloseCode.UNAUTHORIZED]: PusherCloseCode.UNAUTHORIZED,
  [CloseCode.FORBIDDEN]: PusherCloseCode.UNAUTHORIZED,
  [CloseCode.SLOW_CONSUMER]: PusherCloseCode.OVER_CAPACITY,
  [CloseCode.RATE_LIMITED]: PusherCloseCode.OVER_CAPACITY,
  [CloseCode.IDLE_TIMEOUT]: PusherCloseCode.PONG_TIMEOUT,
};

/** The Pusher code for one of CloseCode's. */
export function pusherCloseCodeFor(code: number): number {
  return CLOSE_CODES[code] ?? PusherCloseCode.RECONNECT;
}

/**
 * Sends a `pusher:ping` that the client answers with `pusher:pong`, and marks
 * it in the socket's window: the pong proves the client read everything sent
 * before the ping (a socket delivers in order), so it releases that much of the
 * window. One is outstanding at a time.
 */
function solicit(socket: SocketState): void {
  if (socket.window.soliciting) return;
  try {
    socket.ws.send(PUSHER_PING);
  } catch {
    // Closing: the engine forgets it on its next send.
    return;
  }
  socket.window.solicit();
}

/**
 * The engine's dialect for Pusher connections: pusher-js's exact ping is
 * answered by the runtime without waking the object; pusher-js pings only
 * after PUSHER_ACTIVITY_TIMEOUT_SECONDS without hearing anything, so the idle
 * timeout is two and a half of those, and a connection silent for half of it
 * (one that reads a busy channel without a word) is pinged; Pusher has no
 * batches, so a frame is one event; and pusher-js acknowledges nothing on its
 * own, so the window is released by pongs to pings the server sends.
 */
export const PUSHER_DIALECT: SocketDialect = {
  heartbeat: { request: PUSHER_PING, response: PUSHER_PONG },
  closeCode: pusherCloseCodeFor,
  solicit,
  nudge: solicit,
  idleTimeoutSeconds: Math.round(PUSHER_ACTIVITY_TIMEOUT_SECONDS * 2.5),
  maxEventsPerFrame: 1,
};
