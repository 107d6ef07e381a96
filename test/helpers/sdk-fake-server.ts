import { randomUUID } from "node:crypto";
import type { IncomingMessage } from "node:http";
import WebSocket, { WebSocketServer } from "ws";
import {
  CloseCode,
  PING,
  PONG,
  SUBPROTOCOL,
  TOKEN_SUBPROTOCOL_PREFIX,
  parseClientFrame,
  roomSocketPath,
  type AckFrame,
  type ClientFrame,
  type ServerMessage,
  type ServerEvent,
  type WelcomeEvent,
} from "../../protocol";
import { Waiters } from "./wait";

/**
 * A room server in this process, speaking the wire protocol (docs/protocol.md)
 * on 127.0.0.1 with a real `ws` server: welcome, messages with seqs and tags,
 * resume with `since`/`epoch`, `lost` for another epoch, answers to pings and
 * socket publishes, and acks checked against what each socket was sent. The
 * test decides everything else (when to publish, batch, stay silent, close,
 * refuse), so client behaviour can be checked to the frame and the
 * millisecond without a room's timing in between.
 */

/** What the server does with a new connection. */
export type Admission = "welcome" | "silent" | { close: number; reason?: string };

export interface FakeRoomOptions {
  room?: string;
  /** Announced in the welcome: bytes before the room waits for an ack (0 = none). Default 1 MiB. */
  window?: number;
  /** Announced in the welcome: client frame budget. Default 20/s, burst 60. */
  rate?: WelcomeEvent["rate"];
  /** Announced in the welcome and enforced as the service does: the largest message data, bytes of its JSON. Default: none (an older server). */
  maxMessageBytes?: number;
  /** Decides each connection by its URL, index (0 = first) and what it offered. Default: welcome all. */
  admit?: (url: URL, index: number, connection: FakeConnection) => Admission;
  /** Whether `ping` is answered with `pong`. Default true. */
  answerPings?: boolean;
}

/** A client frame as the server received it. */
export interface Received {
  at: number;
  text: string;
  /** Parsed, unless it was the heartbeat. */
  frame: ClientFrame | null;
}

/** One client connection as the server sees it. */
export class FakeConnection {
  readonly received: Received[] = [];
  /** Messages sent on this socket, by seq: an ack must name one of them with its tag. */
  readonly sent = new Map<number, ServerMessage>();
  readonly openedAt = Date.now();
  closeInfo: { code: number; reason: string } | null = null;
  welcomed = false;

  constructor(
    readonly ws: WebSocket,
    /** The request URL: `since`, `epoch` and a `?token=` are in its query. */
    readonly url: URL,
    /** The subprotocols the client offered (`Sec-WebSocket-Protocol`), in order. */
    readonly protocols: string[],
  ) {}

  /** The token the client presented, in the subprotocol offer (`token.<jwt>`) or in the query. */
  get token(): string | null {
    return presentedToken(this.protocols, this.url);
  }

  get acks(): Array<AckFrame & { at: number }> {
    return this.received.flatMap((r) => (r.frame?.type === "ack" ? [{ ...r.frame, at: r.at }] : []));
  }

  /** Sends `events` as one frame (an array when there are several). */
  send(events: ServerEvent | ServerEvent[]): void {
    const list = Array.isArray(events) ? events : [events];
    for (const event of list) if (event.type === "message") this.sent.set(event.seq, event);
    if (this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(list.length === 1 ? list[0] : list));
  }

  close(code: number, reason = ""): void {
    this.ws.close(code, reason);
  }
}

/** The subprotocols a client offered, in order. */
export function offeredProtocols(request: IncomingMessage): string[] {
  return (request.headers["sec-websocket-protocol"] ?? "").split(",").map((p) => p.trim()).filter((p) => p !== "");
}

/** The token a client presented, in the subprotocol offer (`token.<jwt>`) or in the query. */
export function presentedToken(protocols: string[], url: URL): string | null {
  const offered = protocols.find((p) => p.startsWith(TOKEN_SUBPROTOCOL_PREFIX));
  return offered?.slice(TOKEN_SUBPROTOCOL_PREFIX.length) ?? url.searchParams.get("token");
}

export class FakeRoomServer {
  readonly room: string;
  readonly epoch = randomUUID();
  readonly connections: FakeConnection[] = [];
  readonly history: ServerMessage[] = [];
  #wss: WebSocketServer;
  #options: FakeRoomOptions;
  #waiters = new Waiters();

  private constructor(wss: WebSocketServer, options: FakeRoomOptions) {
    this.#wss = wss;
    this.#options = options;
    this.room = options.room ?? "fake";
    wss.on("connection", (ws, request) => this.#accept(ws, request));
  }

  /** Starts a server on a free port of 127.0.0.1. */
  static async start(options: FakeRoomOptions = {}): Promise<FakeRoomServer> {
    // Like the service, it selects fanout.v1 when offered: `ws` and browsers drop an answer that selects nothing from an offer.
    const wss = new WebSocketServer({ host: "127.0.0.1", port: 0, handleProtocols: (offered) => (offered.has(SUBPROTOCOL) ? SUBPROTOCOL : false) });
    await new Promise<void>((resolve, reject) => {
      wss.once("listening", resolve);
      wss.once("error", reject);
    });
    return new FakeRoomServer(wss, options);
  }

  /** Origin to give a client as `host`. */
  get host(): string {
    const address = this.#wss.address();
    const port = typeof address === "object" && address ? address.port : 0;
    return `http://127.0.0.1:${port}`;
  }

  /** The room's WebSocket URL. */
  get url(): string {
    return `${this.host.replace(/^http/, "ws")}${roomSocketPath(this.room)}`;
  }

  get seq(): number {
    return this.history.at(-1)?.seq ?? 0;
  }

  /** Connections that are still open. */
  get open(): FakeConnection[] {
    return this.connections.filter((c) => c.closeInfo === null);
  }

  /** Appends messages to history and sends them to every welcomed connection, all in one frame. */
  publish(...datas: unknown[]): ServerMessage[] {
    const messages = datas.map((data) => this.#append(data));
    for (const connection of this.open) if (connection.welcomed) connection.send(messages);
    return messages;
  }

  /** Waits until `predicate` holds, re-checked on every connection, frame and close; fails after `timeoutMs`. */
  waitFor(predicate: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
    return this.#waiters.waitFor(predicate, { timeoutMs, what });
  }

  async stop(): Promise<void> {
    for (const client of this.#wss.clients) client.terminate();
    await new Promise<void>((resolve) => this.#wss.close(() => resolve()));
  }

  #append(data: unknown): ServerMessage {
    const message: ServerMessage = { type: "message", seq: this.seq + 1, data, ts: Date.now(), tag: Math.floor(Math.random() * 0xffff_ffff) };
    this.history.push(message);
    return message;
  }

  #accept(ws: WebSocket, request: IncomingMessage): void {
    const offered = offeredProtocols(request);
    const connection = new FakeConnection(ws, new URL(request.url ?? "/", this.host), offered);
    const index = this.connections.push(connection) - 1;
    ws.on("message", (data, isBinary) => this.#onFrame(connection, isBinary ? "" : data.toString()));
    ws.on("close", (code, reason) => {
      connection.closeInfo = { code, reason: reason.toString() };
      this.#notify();
    });
    ws.on("error", () => {});
    const admission = this.#options.admit?.(connection.url, index, connection) ?? "welcome";
    if (admission === "welcome") this.#welcome(connection);
    else if (admission !== "silent") connection.close(admission.close, admission.reason);
    this.#notify();
  }

  /** Welcome, then what `since` asks for: history after it, or `lost` for another epoch. */
  #welcome(connection: FakeConnection): void {
    const welcome: WelcomeEvent = {
      type: "welcome",
      room: this.room,
      seq: this.seq,
      epoch: this.epoch,
      window: this.#options.window ?? 1024 * 1024,
      rate: this.#options.rate ?? { perSecond: 20, burst: 60 },
    };
    if (this.#options.maxMessageBytes !== undefined) welcome.maxMessageBytes = this.#options.maxMessageBytes;
    connection.send(welcome);
    connection.welcomed = true;
    const since = connection.url.searchParams.get("since");
    if (since === null) return;
    const epoch = connection.url.searchParams.get("epoch");
    if (epoch !== this.epoch || Number(since) > this.seq) {
      connection.send({ type: "lost", reason: "epoch", from: 1, to: this.seq });
      return;
    }
    const missed = this.history.filter((m) => m.seq > Number(since));
    if (missed.length > 0) connection.send(missed);
  }

  #onFrame(connection: FakeConnection, text: string): void {
    const at = Date.now();
    if (text === PING) {
      connection.received.push({ at, text, frame: null });
      if (this.#options.answerPings ?? true) connection.ws.send(PONG);
      this.#notify();
      return;
    }
    const parsed = parseClientFrame(text);
    if (!parsed.ok) {
      connection.close(CloseCode.BAD_FRAME, parsed.error);
      return;
    }
    connection.received.push({ at, text, frame: parsed.value });
    const frame = parsed.value;
    if (frame.type === "ack") {
      // An ack is a claim: it must name a message this socket was sent, with its tag.
      if (connection.sent.get(frame.seq)?.tag !== frame.tag) connection.close(CloseCode.BAD_FRAME, "ack for a message not sent");
    } else if (frame.type === "publish" && this.#options.maxMessageBytes !== undefined && Buffer.byteLength(JSON.stringify(frame.data)) > this.#options.maxMessageBytes) {
      // What the service answers a publish over its limit: refused, the socket stays open.
      connection.send({ type: "error", code: "too_large", message: `message data over ${this.#options.maxMessageBytes} bytes as JSON`, id: frame.id });
    } else {
      const message = this.#append(frame.data);
      connection.send({ type: "published", id: frame.id, seq: message.seq });
      for (const other of this.open) if (other.welcomed) other.send(message);
    }
    this.#notify();
  }

  #notify(): void {
    this.#waiters.notify();
  }
}
