import type { Context } from "hono";
import { closeReason } from "../../protocol";
import { PUSHER_PROTOCOL, PusherCloseCode, pusherFrame } from "../../protocol/pusher";
import { logEvent } from "../../common/log";
import { accessSettings, pusherSettings } from "../../common/settings";
import type { FanoutAppEnv } from "../app-env";
import { jsonError } from "../errors";
import { openConnection } from "../hub-placement";
import { originAllowed } from "../auth/origins";
import { noteHub } from "../local-admission";

/**
 * A refused Pusher connection: accepted by the worker itself (no hub is
 * created or woken), told why with `pusher:error`, and closed with the code.
 * Pusher clients read the code to decide whether to try again; an HTTP error
 * on the upgrade would make pusher-js retry forever.
 */
function refused(code: number, message: string): Response {
  const pair = new WebSocketPair();
  const client = pair[0];
  const server = pair[1];
  server.accept();
  server.send(pusherFrame("pusher:error", { code, message }));
  server.close(code, closeReason(message));
  return new Response(null, { status: 101, webSocket: client });
}

/** What is wrong with a connection's `protocol` parameter (and its close code), or null. */
function protocolProblem(protocol: string | undefined): { code: number; message: string } | null {
  if (protocol === undefined || protocol === "") return { code: PusherCloseCode.NO_PROTOCOL, message: `no protocol version: connect with ?protocol=${PUSHER_PROTOCOL}` };
  if (!/^\d{1,3}$/.test(protocol)) return { code: PusherCloseCode.BAD_PROTOCOL, message: "the protocol version must be a number" };
  if (Number(protocol) !== PUSHER_PROTOCOL) return { code: PusherCloseCode.UNSUPPORTED_PROTOCOL, message: `unsupported protocol version ${protocol}: this server speaks ${PUSHER_PROTOCOL}` };
  return null;
}

/**
 * `GET /app/{key}?protocol=7&client=…&version=…`: a Pusher connection
 * (docs/pusher.md). The app key and the protocol version are checked here,
 * and a refusal is a closed socket with Pusher's code; an accepted connection
 * goes to one of the Pusher hubs, at random, as a multiplexed one goes to a hub.
 */
export async function pusherSocket(c: Context<FanoutAppEnv>, admission: (c: Context<FanoutAppEnv>) => Response | null): Promise<Response> {
  if (c.req.header("upgrade")?.toLowerCase() !== "websocket") {
    return jsonError(c, 426, "upgrade_required", "this endpoint takes a WebSocket upgrade", { Upgrade: "websocket" });
  }
  const settings = pusherSettings(c.env);
  const hubs = c.env.PUSHER_HUBS;
  const refuse = (code: number, reason: string, message: string): Response => {
    logEvent("refusal", { path: "/app/{key}", reason, close: code });
    return refused(code, message);
  };
  if (settings.app === null) return refuse(PusherCloseCode.APP_NOT_FOUND, "pusher_off", `the Pusher front door is off: ${settings.off}`);
  if (!hubs) return refuse(PusherCloseCode.APP_NOT_FOUND, "pusher_off", "the Pusher front door is off: the service binds no PUSHER_HUBS namespace");
  if (c.req.param("key") !== settings.app.key) return refuse(PusherCloseCode.APP_NOT_FOUND, "unknown_app_key", "no app with this key");
  const protocol = protocolProblem(c.req.query("protocol"));
  if (protocol) return refuse(protocol.code, "bad_protocol", protocol.message);
  if (!originAllowed(c.req.header("origin"), accessSettings(c.env).allowedOrigins)) {
    return refuse(PusherCloseCode.UNAUTHORIZED, "origin_not_allowed", "this origin may not open sockets");
  }
  const busy = admission(c);
  if (busy) return busy;
  const { answer, hub } = await openConnection({ kind: "pusher", namespace: hubs, count: c.get("limits").MULTIPLEX_HUBS }, c.req.url, new Headers(c.req.raw.headers));
  if (hub !== null && c.env.LOCAL_ADMIN_TOKEN !== undefined) noteHub(hub);
  // Every hub tried was full: Pusher's "over capacity", so the client backs off.
  if (answer.status === 503) return refused(PusherCloseCode.OVER_CAPACITY, "over capacity: retry later");
  return answer;
}
