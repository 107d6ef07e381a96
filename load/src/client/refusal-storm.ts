import { WebSocket } from "ws";
import { MULTIPLEX_PATH } from "../../../protocol";
import { sleep } from "../kit/time";

/** How long the storm's connections get, once it stops, to show how the server closed them. */
const CLOSE_WAIT_MS = 5000;
/** How often a paced connection sends what has come due. */
const TICK_MS = 20;
/** Bytes a connection may have queued on the client before it waits for the kernel to take them. */
const CLIENT_QUEUE_BYTES = 256 * 1024;

/** What a refusal storm came to. */
export interface RefusalStormOutcome {
  connections: number;
  /** Subscribes sent, over every connection. */
  sent: number;
  /** Connections the server closed, by close code (`none`: still open when the storm ended). */
  closesByCode: Record<string, number>;
}

/**
 * Hostile multiplexed connections (`GET /ws`) that never read: each subscribes
 * to one room, stops reading its socket, and then sends that subscribe again
 * as fast as its socket takes it, up to `perConnection` times. Every one is
 * refused (the room is already followed, or the subscribe budget is spent),
 * at `ratePerSecond` (0: as fast as the socket takes them),
 * or, with `frame` "ping", sends heartbeats instead (the runtime answers
 * them without running any code of ours: the floor of what a frame costs),
 * so the hub answers without serving anything: what such a client costs the
 * server, and the honest readers beside it, is what the run measures. At the
 * end each connection reads again, to tell how (and whether) the server
 * closed it. Loopback targets only, like every load run; bounded in count.
 */
export class RefusalStorm {
  readonly #sockets: WebSocket[] = [];
  readonly #closes = new Map<WebSocket, number>();
  #sent = 0;
  #stopped = false;
  #running: Promise<void>[] = [];

  constructor(
    private readonly wsOrigin: string,
    private readonly wsParams: Record<string, string>,
    private readonly connections: number,
    private readonly perConnection: number,
    private readonly ratePerSecond: number,
    private readonly frame: "subscribe" | "ping" = "subscribe",
  ) {}

  /** Opens the connections, each following its one room, and starts sending. */
  async start(): Promise<void> {
    const search = new URLSearchParams(this.wsParams).toString();
    const url = this.wsOrigin + MULTIPLEX_PATH + (search ? `?${search}` : "");
    const opened = await Promise.all(Array.from({ length: this.connections }, (_, i) => this.#open(url, `refused-${i}`)));
    this.#running = opened.map((ws, i) => this.#flood(ws, `refused-${i}`));
  }

  /** Stops sending, lets each connection read again, and reports how the server closed them. */
  async stop(): Promise<RefusalStormOutcome> {
    this.#stopped = true;
    await Promise.all(this.#running);
    for (const ws of this.#sockets) socketOf(ws)?.resume();
    const deadline = Date.now() + CLOSE_WAIT_MS;
    while (this.#closes.size < this.#sockets.length && Date.now() < deadline) await sleep(100);
    const closesByCode: Record<string, number> = {};
    for (const ws of this.#sockets) {
      const code = this.#closes.has(ws) ? String(this.#closes.get(ws)) : "none";
      closesByCode[code] = (closesByCode[code] ?? 0) + 1;
      ws.terminate();
    }
    return { connections: this.#sockets.length, sent: this.#sent, closesByCode };
  }

  #open(url: string, room: string): Promise<WebSocket> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, { perMessageDeflate: false, followRedirects: false });
      this.#sockets.push(ws);
      ws.on("error", reject);
      ws.on("close", (code) => this.#closes.set(ws, code));
      // The close frame reaches a socket that reads again at the end; ws reports it before TCP ends.
      ws.once("open", () => (ws as unknown as { _receiver?: NodeJS.EventEmitter })._receiver?.on("conclude", (code: number) => this.#closes.set(ws, code)));
      ws.on("message", (data) => {
        // Reads until its first room is subscribed, then stops reading for good (until the end).
        if (!String(data).includes('"subscribed"')) return;
        socketOf(ws)?.pause();
        resolve(ws);
      });
      ws.once("open", () => ws.send(JSON.stringify({ type: "subscribe", room })));
    });
  }

  async #flood(ws: WebSocket, room: string): Promise<void> {
    const frame = this.frame === "ping" ? "ping" : JSON.stringify({ type: "subscribe", room });
    const started = Date.now();
    let sent = 0;
    while (sent < this.perConnection && !this.#stopped && ws.readyState === WebSocket.OPEN) {
      // Paced: what is due by now, in one burst per tick (a timer per frame would cost this process more than the server).
      const due = this.ratePerSecond > 0 ? Math.min(this.perConnection, Math.floor(((Date.now() - started) * this.ratePerSecond) / 1000) + 1) : this.perConnection;
      const burstEnd = Math.min(due, sent + 256);
      while (sent < burstEnd && ws.bufferedAmount <= CLIENT_QUEUE_BYTES) {
        ws.send(frame);
        sent += 1;
        this.#sent += 1;
      }
      if (ws.bufferedAmount > CLIENT_QUEUE_BYTES) await sleep(5);
      else if (sent < due) await new Promise((resolve) => setImmediate(resolve));
      else await sleep(TICK_MS);
    }
  }
}

function socketOf(ws: WebSocket): { pause(): void; resume(): void } | undefined {
  return (ws as unknown as { _socket?: { pause(): void; resume(): void } })._socket;
}
