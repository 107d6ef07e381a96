/**
 * One room of the bare workerd baseline: the least a Durable Object can do to
 * fan out on this runtime, so that what the service spends beyond it is
 * visible. Sockets are accepted with the Hibernation API and kept in a set;
 * each publish (an RPC from the worker, as the service's worker calls its
 * room) is serialized once and sent to every socket; `ping` is
 * answered by the runtime itself. With DURABLE=1 each message is inserted into
 * SQLite first: the object's output gate holds the answer and the sends until
 * the write is committed, as the service answers only once a message is
 * stored.
 *
 * What it leaves out on purpose: acks (accepted and ignored, no window),
 * history replay (`since` is ignored), coalescing, authentication, limits,
 * counters, registration.
 */
import { DurableObject } from "cloudflare:workers";
import type { ServerMessage, WelcomeEvent } from "../../../protocol";
import { autoResponse, webSocketPair, type DurableObjectState, type UpgradeInit } from "./runtime";

export interface BareEnv {
  /** "1": every message is stored before it is answered and sent. */
  DURABLE?: string;
}

/** The window announced in the welcome, as the service's default; nothing enforces it here. */
const ANNOUNCED_WINDOW_BYTES = 1_048_576;
/** Stored messages per room: a ring of this many rows, so a publish is one row write (like the Node durable baseline). */
const HISTORY_SLOTS = 1000;

/** What a publish answers the worker. */
export interface BarePublished {
  seq: number;
  recipients: number;
}

export class BareRoom extends DurableObject<BareEnv> {
  readonly #durable: boolean;
  readonly #sockets = new Set<WebSocket>();
  #seq = 0;
  readonly #epoch: string;

  constructor(ctx: DurableObjectState, env: BareEnv) {
    super(ctx, env);
    this.#durable = env.DURABLE === "1";
    // Sockets outlive an instance under hibernation: a new instance finds them here.
    for (const ws of ctx.getWebSockets()) this.#sockets.add(ws);
    ctx.setWebSocketAutoResponse(autoResponse("ping", "pong"));
    if (this.#durable) {
      ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS history (slot INTEGER PRIMARY KEY, seq INTEGER NOT NULL, ts INTEGER NOT NULL, frame TEXT NOT NULL)");
      const top = ctx.storage.sql.exec("SELECT max(seq) AS seq FROM history").toArray()[0]?.seq;
      this.#seq = typeof top === "number" ? top : 0;
      // Stored history survives restarts, so its identity does too.
      this.#epoch = "durable";
    } else {
      this.#epoch = crypto.randomUUID();
    }
  }

  /** The upgrade, forwarded by the worker (a 101 with a socket can only be a fetch answer). */
  fetch(request: Request): Response {
    const room = decodeURIComponent(new URL(request.url).pathname.split("/")[2] ?? "");
    const { client, server } = webSocketPair();
    this.ctx.acceptWebSocket(server);
    this.#sockets.add(server);
    const welcome: WelcomeEvent = { type: "welcome", room, seq: this.#seq, epoch: this.#epoch, window: ANNOUNCED_WINDOW_BYTES, rate: { perSecond: 0, burst: 0 } };
    server.send(JSON.stringify(welcome));
    const init: UpgradeInit = { status: 101, webSocket: client };
    return new Response(null, init);
  }

  /** One message: `body` is the HTTP body as the worker read it. */
  publish(body: string): BarePublished {
    const seq = ++this.#seq;
    const ts = Date.now();
    const message: ServerMessage = { type: "message", seq, data: decodeBody(body), ts, tag: (Math.random() * 2 ** 32) >>> 0 };
    const frame = JSON.stringify(message);
    if (this.#durable) {
      this.ctx.storage.sql.exec("INSERT OR REPLACE INTO history (slot, seq, ts, frame) VALUES (?, ?, ?, ?)", seq % HISTORY_SLOTS, seq, ts, frame);
    }
    let recipients = 0;
    for (const ws of this.#sockets) {
      try {
        ws.send(frame);
        recipients++;
      } catch {
        // Closing or closed: it leaves with its close event.
      }
    }
    return { seq, recipients };
  }

  // Client frames (acks) are accepted and ignored: there is no window to free.
  webSocketMessage(): void {}

  webSocketClose(ws: WebSocket, code: number, reason: string): void {
    this.#sockets.delete(ws);
    try {
      ws.close(code === 1005 || code === 1006 || code === 1015 ? 1000 : code, reason);
    } catch {
      // Already closed by the runtime: nothing to reciprocate.
    }
  }

  webSocketError(ws: WebSocket): void {
    this.#sockets.delete(ws);
  }
}

/** The service's rule: a JSON body is delivered as that JSON value, other text as a string. */
function decodeBody(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}
