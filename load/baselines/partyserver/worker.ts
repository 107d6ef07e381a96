/**
 * The PartyServer baseline: a room server written as a PartyServer user
 * writes one from its README (`partyserver` on npm, pinned in package.json),
 * so that the service is measured beside a real peer on the same workerd.
 *
 * - `RoomServer` is a `Server` with hibernation on. A socket that connects is
 *   sent a welcome (`onConnect`); a publish is an HTTP POST to the room
 *   (`onRequest`) that gives the message the room's next seq and sends it to
 *   everyone with `this.broadcast`. Nothing else: no acks (the load client's
 *   acks and pings reach `onMessage`, which ignores them, as a PartyServer
 *   room ignores what it does not expect), no window, no history, no resume.
 * - In front, `routePartykitRequest`, as the README has it. The load tool
 *   speaks the service's paths (`/rooms/{room}/ws`, `/rooms/{room}/publish`),
 *   so they are mapped onto PartyKit's (`/parties/room-server/{room}`) first:
 *   that mapping is the only line here a PartyServer user would not write.
 *
 * Its events are the service's wire format (protocol/), so the load tool
 * reads its latency and losses as it reads ours.
 *
 * Type-checked with Cloudflare's types (tsconfig.json); built into
 * load/dist/partyserver-worker.js by load/build.mjs.
 */
import { routePartykitRequest, Server, type Connection } from "partyserver";
import type { PublishAnswer, ServerMessage, WelcomeEvent } from "../../../protocol";

interface Env {
  /** The binding's name is the party's: `room-server` in PartyKit's paths. */
  RoomServer: DurableObjectNamespace<RoomServer>;
}

/** The window the welcome announces, as the service's default; nothing here enforces it. */
const ANNOUNCED_WINDOW_BYTES = 1_048_576;

export class RoomServer extends Server<Env> {
  static override options = { hibernate: true };

  /** Where the room's messages stand; a new instance starts a new history (nothing is stored). */
  #seq = 0;
  readonly #epoch = crypto.randomUUID();

  override onConnect(connection: Connection): void {
    const welcome: WelcomeEvent = { type: "welcome", room: this.name, seq: this.#seq, epoch: this.#epoch, window: ANNOUNCED_WINDOW_BYTES, rate: { perSecond: 0, burst: 0 } };
    connection.send(JSON.stringify(welcome));
  }

  override async onRequest(request: Request): Promise<Response> {
    if (request.method !== "POST") return new Response("publish with POST", { status: 405 });
    const body = await request.text();
    const seq = ++this.#seq;
    const message: ServerMessage = { type: "message", seq, data: decodeBody(body), ts: Date.now(), tag: (Math.random() * 2 ** 32) >>> 0 };
    this.broadcast(JSON.stringify(message));
    const answer: Omit<PublishAnswer, "recipients"> = { room: this.name, seq };
    return Response.json(answer);
  }
}

const ROOM_ROUTE = /^\/rooms\/([^/]+)\/(ws|publish)$/;

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname === "/healthz") return Response.json({ ok: true, server: "partyserver" });
    // The load tool's paths onto PartyKit's: /parties/<party>/<room>.
    const match = ROOM_ROUTE.exec(url.pathname);
    if (match) url.pathname = `/parties/room-server/${match[1]}`;
    return (await routePartykitRequest(new Request(url, request), env)) ?? new Response("Not Found", { status: 404 });
  },
} satisfies ExportedHandler<Env>;

/** The service's rule: a JSON body is delivered as that JSON value, other text as a string. */
function decodeBody(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}
