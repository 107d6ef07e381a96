import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server } from "node:http";
import WebSocket, { WebSocketServer } from "ws";
import {
  CloseCode,
  MULTIPLEX_PATH,
  PING,
  PONG,
  SUBPROTOCOL,
  parseMultiplexFrame,
  type ConnectionWelcomeEvent,
  type MultiplexClientFrame,
  type MultiplexEvent,
  type PresenceEvent,
  type PresenceMember,
  type RoomAckFrame,
  type ServerMessage,
  type SubscribeFrame,
} from "../../protocol";
import { offeredProtocols, presentedToken, type Admission } from "./sdk-fake-server";
import { Waiters } from "./wait";

/**
 * The multiplexed connection (`GET /ws`, protocol/multiplex.ts) in this
 * process, over a real `ws` server on 127.0.0.1: rooms with their own
 * history, epoch and tags; subscribe, unsubscribe, publish, ack and auth
 * frames parsed with the protocol's own parser (a frame it refuses closes
 * the connection with 4000, as the service does); per-room refusals
 * (forbidden, too_many_rooms, rate_limited, not_subscribed) with the
 * connection open; one window per connection over all its rooms, enforced
 * (a frame that does not fit waits for an ack) and every ack checked as a
 * claim (it must name the last message of a frame of that room sent to this
 * connection with its tag, or a presence event of the room with the seq read
 * when it was sent); the frame budget enforced with 4009; and `auth`
 * replacing the token's grants (`unsubscribed` forbidden for rooms it no
 * longer grants). The test decides when rooms publish, change presence,
 * lose history or close connections. It can also serve a few HTTP pages
 * beside `/ws` (a demo page and its bundle), so a browser loads them from the
 * same origin.
 */

/** Tokens of this fake: any string; which rooms it opens and when it expires are the test's to say. */
export interface FakeMultiplexOptions {
  /** Announced and enforced: unacknowledged bytes per connection, over all its rooms (0 = none). Default 1 MiB. */
  window?: number;
  /** Announced and enforced (close 4009): frames that are not flow control. Default 20/s, burst 60. */
  rate?: ConnectionWelcomeEvent["rate"];
  /** Announced and enforced (`too_large`). Default 65536. */
  maxMessageBytes?: number;
  /** Announced and enforced (`too_many_rooms`). Default 100. */
  maxRooms?: number;
  /** Announced: subscribes per second. Default 10/s, burst 20. */
  subscribeRate?: ConnectionWelcomeEvent["subscribeRate"];
  /** Enforced (`rate_limited`), when it should differ from the announced one (a server stricter than it says). */
  enforcedSubscribeRate?: ConnectionWelcomeEvent["subscribeRate"];
  /** Whether `token` opens `room`. Default: every token opens every room. */
  grants?: (token: string | null, room: string) => boolean;
  /** Expiry (seconds since the epoch) of a token an `auth` frame carries, or null to refuse it. Default: its JWT `exp`, else an hour from now. */
  expiryOf?: (token: string) => number | null;
  /** Decides each connection by its URL, index (0 = first) and what it offered. Default: welcome all. */
  admit?: (url: URL, index: number, connection: FakeMultiplexConnection) => Admission;
  /** Pages served over HTTP beside `/ws`, by path. */
  pages?: Record<string, { type: string; body: string }>;
}

/** A presence event without its tag (each connection gets its own). */
export type PresenceChange = PresenceEvent extends infer E ? (E extends unknown ? Omit<E, "tag"> : never) : never;

/** A client frame as the server received it. */
export interface ReceivedFrame {
  at: number;
  text: string;
  /** Parsed, unless it was the heartbeat. */
  frame: MultiplexClientFrame | null;
}

/** A frame of room events sent to a connection, as its window counts it. */
interface SentFrame {
  room: string;
  bytes: number;
  /** What an ack must name to release it: the frame's last message (or, for a presence event, the seq read then) and its tag. */
  seq: number;
  tag: number;
  released: boolean;
}

/** One room: its history, epoch and members. */
export class FakeRoom {
  epoch = randomUUID();
  readonly history: ServerMessage[] = [];
  members: PresenceMember[] = [];

  constructor(readonly name: string) {}

  get seq(): number {
    return this.history.at(-1)?.seq ?? 0;
  }

  append(data: unknown): ServerMessage {
    const message: ServerMessage = { type: "message", seq: this.seq + 1, data, ts: Date.now(), tag: randomTag() };
    this.history.push(message);
    return message;
  }
}

function randomTag(): number {
  return Math.floor(Math.random() * 0xffff_ffff);
}

/** A token bucket as the service keeps one: starts full, refills continuously. */
class Bucket {
  #tokens: number;
  #at = Date.now();
  constructor(readonly rate: { perSecond: number; burst: number }) {
    this.#tokens = rate.burst;
  }
  /** Takes one token; false when there is none (0 per second: no limit). */
  take(): boolean {
    if (this.rate.perSecond <= 0) return true;
    const now = Date.now();
    this.#tokens = Math.min(this.rate.burst, this.#tokens + ((now - this.#at) / 1000) * this.rate.perSecond);
    this.#at = now;
    if (this.#tokens < 1) return false;
    this.#tokens -= 1;
    return true;
  }
}

/** One multiplexed connection as the server sees it. */
export class FakeMultiplexConnection {
  readonly received: ReceivedFrame[] = [];
  /** Rooms this connection follows. */
  readonly rooms = new Set<string>();
  readonly openedAt = Date.now();
  closeInfo: { code: number; reason: string } | null = null;
  welcomed = false;
  /** The token its grants come from: the one it opened with, then each `auth` frame's. */
  token: string | null;
  /** The most bytes it ever had unacknowledged. */
  mostUnacked = 0;
  /** Room frames sent, in order (released by acks). */
  readonly frames: SentFrame[] = [];
  /** Room frames waiting for window space, in order. */
  readonly waiting: Array<{ room: string; events: MultiplexEvent[] }> = [];
  /** Where each followed room stands for this connection: the last seq sent. */
  readonly position = new Map<string, number>();
  frameBudget: Bucket | null = null;
  subscribeBudget: Bucket | null = null;

  constructor(
    readonly ws: WebSocket,
    /** The request URL: a `?token=` is in its query. */
    readonly url: URL,
    /** The subprotocols the client offered, in order. */
    readonly protocols: string[],
  ) {
    this.token = presentedToken(protocols, url);
  }

  /** Frames of one type the client sent, with when they arrived. */
  framesOf<K extends MultiplexClientFrame["type"]>(type: K): Array<Extract<MultiplexClientFrame, { type: K }> & { at: number }> {
    return this.received.flatMap((r) => (r.frame?.type === type ? [{ ...(r.frame as Extract<MultiplexClientFrame, { type: K }>), at: r.at }] : []));
  }

  get acks(): Array<RoomAckFrame & { at: number }> {
    return this.framesOf("ack");
  }

  get subscribes(): Array<SubscribeFrame & { at: number }> {
    return this.framesOf("subscribe");
  }

  /** Bytes sent to it and not yet acknowledged. */
  get unacked(): number {
    return this.frames.reduce((sum, f) => sum + (f.released ? 0 : f.bytes), 0);
  }

  /** Sends `events` as one frame, whatever the window (control events, or a test's own frame). */
  sendRaw(events: MultiplexEvent | MultiplexEvent[]): void {
    const list = Array.isArray(events) ? events : [events];
    if (this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(list.length === 1 ? list[0] : list));
  }

  close(code: number, reason = ""): void {
    this.ws.close(code, reason);
  }
}

export class FakeMultiplexServer {
  readonly connections: FakeMultiplexConnection[] = [];
  #rooms = new Map<string, FakeRoom>();
  #http: Server;
  #wss: WebSocketServer;
  #options: FakeMultiplexOptions;
  #waiters = new Waiters();

  private constructor(http: Server, wss: WebSocketServer, options: FakeMultiplexOptions) {
    this.#http = http;
    this.#wss = wss;
    this.#options = options;
    wss.on("connection", (ws, request) => this.#accept(ws, request));
  }

  /** Starts a server on a free port of 127.0.0.1. */
  static async start(options: FakeMultiplexOptions = {}): Promise<FakeMultiplexServer> {
    const http = createServer((request, response) => {
      const page = options.pages?.[new URL(request.url ?? "/", "http://x").pathname];
      if (page) response.writeHead(200, { "content-type": page.type }).end(page.body);
      else response.writeHead(404).end();
    });
    // Like the service, it selects fanout.v1 when offered: `ws` and browsers drop an answer that selects nothing from an offer.
    const wss = new WebSocketServer({ server: http, path: MULTIPLEX_PATH, handleProtocols: (offered) => (offered.has(SUBPROTOCOL) ? SUBPROTOCOL : false) });
    await new Promise<void>((resolve, reject) => {
      http.once("error", reject);
      http.listen(0, "127.0.0.1", () => resolve());
    });
    return new FakeMultiplexServer(http, wss, options);
  }

  /** Origin to give a client as `host`. */
  get host(): string {
    const address = this.#http.address();
    const port = typeof address === "object" && address ? address.port : 0;
    return `http://127.0.0.1:${port}`;
  }

  /** The multiplexed connection's WebSocket URL. */
  get url(): string {
    return `${this.host.replace(/^http/, "ws")}${MULTIPLEX_PATH}`;
  }

  /** Connections that are still open. */
  get open(): FakeMultiplexConnection[] {
    return this.connections.filter((c) => c.closeInfo === null);
  }

  /** The room named `name` (made on first use). */
  room(name: string): FakeRoom {
    let room = this.#rooms.get(name);
    if (!room) this.#rooms.set(name, (room = new FakeRoom(name)));
    return room;
  }

  /** Appends messages to a room and sends them, as one frame, to every connection that follows it. */
  publish(name: string, ...datas: unknown[]): ServerMessage[] {
    const room = this.room(name);
    const messages = datas.map((data) => room.append(data));
    for (const connection of this.open) if (connection.rooms.has(name)) this.#deliver(connection, name, messages.map((m) => ({ ...m, room: name })));
    return messages;
  }

  /** Sends a presence event of a room to every connection that follows it (each with its own tag). */
  presence(name: string, change: PresenceChange): void {
    for (const connection of this.open) if (connection.rooms.has(name)) this.#sendPresence(connection, name, change);
  }

  /** The room loses its history: a new epoch, seqs start again. Followers are not told (a resume with the old epoch is). */
  loseHistory(name: string): void {
    const room = this.room(name);
    room.epoch = randomUUID();
    room.history.length = 0;
  }

  /** Waits until `predicate` holds, re-checked on every connection, frame and close; fails after `timeoutMs`. */
  waitFor(predicate: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
    return this.#waiters.waitFor(predicate, { timeoutMs, what });
  }

  async stop(): Promise<void> {
    for (const client of this.#wss.clients) client.terminate();
    await new Promise<void>((resolve) => this.#wss.close(() => resolve()));
    this.#http.closeAllConnections();
    await new Promise<void>((resolve) => this.#http.close(() => resolve()));
  }

  // -------------------------------------------------------------------------

  get #window(): number {
    return this.#options.window ?? 1024 * 1024;
  }

  #accept(ws: WebSocket, request: IncomingMessage): void {
    const connection = new FakeMultiplexConnection(ws, new URL(request.url ?? "/", this.host), offeredProtocols(request));
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

  #welcome(connection: FakeMultiplexConnection): void {
    const welcome: ConnectionWelcomeEvent = {
      type: "welcome",
      window: this.#window,
      rate: this.#options.rate ?? { perSecond: 20, burst: 60 },
      maxMessageBytes: this.#options.maxMessageBytes ?? 65_536,
      maxRooms: this.#options.maxRooms ?? 100,
      subscribeRate: this.#options.subscribeRate ?? { perSecond: 10, burst: 20 },
    };
    connection.frameBudget = new Bucket(welcome.rate);
    connection.subscribeBudget = new Bucket(this.#options.enforcedSubscribeRate ?? welcome.subscribeRate);
    connection.sendRaw(welcome);
    connection.welcomed = true;
  }

  /** Sends a room's events as one frame inside the connection's window, or queues them until acks make room. */
  #deliver(connection: FakeMultiplexConnection, room: string, events: MultiplexEvent[]): void {
    if (connection.waiting.length > 0 || !this.#fits(connection, events)) {
      connection.waiting.push({ room, events });
      return;
    }
    this.#sendFrame(connection, room, events);
  }

  #fits(connection: FakeMultiplexConnection, events: MultiplexEvent[]): boolean {
    const window = this.#window;
    // An empty window takes any frame, so a frame larger than the window still goes out alone.
    return window === 0 || connection.unacked === 0 || connection.unacked + Buffer.byteLength(JSON.stringify(events)) <= window;
  }

  #sendFrame(connection: FakeMultiplexConnection, room: string, events: MultiplexEvent[]): void {
    const text = JSON.stringify(events.length === 1 ? events[0] : events);
    let seq = connection.position.get(room) ?? 0;
    let tag = 0;
    for (const event of events) {
      if (event.type === "message") [seq, tag] = [event.seq, event.tag];
      if (event.type === "presence") tag = event.tag;
    }
    connection.position.set(room, seq);
    connection.frames.push({ room, bytes: Buffer.byteLength(text), seq, tag, released: false });
    connection.mostUnacked = Math.max(connection.mostUnacked, connection.unacked);
    if (connection.ws.readyState === WebSocket.OPEN) connection.ws.send(text);
  }

  #sendPresence(connection: FakeMultiplexConnection, room: string, change: PresenceChange): void {
    this.#deliver(connection, room, [{ ...change, tag: randomTag(), room } as MultiplexEvent]);
  }

  /** Frames that waited for window space, as far as it goes now. */
  #drain(connection: FakeMultiplexConnection): void {
    while (connection.waiting.length > 0 && this.#fits(connection, connection.waiting[0]!.events)) {
      const next = connection.waiting.shift()!;
      this.#sendFrame(connection, next.room, next.events);
    }
  }

  #onFrame(connection: FakeMultiplexConnection, text: string): void {
    const at = Date.now();
    if (text === PING) {
      connection.received.push({ at, text, frame: null });
      connection.ws.send(PONG);
      this.#notify();
      return;
    }
    const parsed = parseMultiplexFrame(text);
    if (!parsed.ok) {
      connection.close(CloseCode.BAD_FRAME, parsed.error);
      return;
    }
    const frame = parsed.value;
    connection.received.push({ at, text, frame });
    if (frame.type === "ack") this.#onAck(connection, frame);
    else if (!connection.frameBudget!.take()) connection.close(CloseCode.RATE_LIMITED, "client frames over the rate limit");
    else this.#onRequest(connection, frame);
    this.#notify();
  }

  #onAck(connection: FakeMultiplexConnection, ack: RoomAckFrame): void {
    if (!connection.rooms.has(ack.room)) {
      connection.sendRaw({ type: "error", room: ack.room, code: "not_subscribed", message: "the connection does not follow this room" });
      return;
    }
    // An ack is a claim: it names the end of a frame of the room with a tag only a reader of
    // that frame can know (for a presence event, with the seq the room stood at when it was sent).
    const frames = connection.frames.filter((f) => f.room === ack.room);
    let named = frames.length - 1;
    while (named >= 0 && !(frames[named]!.seq === ack.seq && frames[named]!.tag === ack.tag)) named -= 1;
    if (named === -1) {
      connection.close(CloseCode.BAD_FRAME, "ack for a message not sent");
      return;
    }
    let released = false;
    for (const f of frames.slice(0, named + 1)) {
      if (!f.released) [f.released, released] = [true, true];
    }
    // An ack that releases nothing is not flow control: it spends the frame budget.
    if (!released && !connection.frameBudget!.take()) {
      connection.close(CloseCode.RATE_LIMITED, "client frames over the rate limit");
      return;
    }
    this.#drain(connection);
  }

  #onRequest(connection: FakeMultiplexConnection, frame: Exclude<MultiplexClientFrame, RoomAckFrame>): void {
    switch (frame.type) {
      case "subscribe":
        return this.#subscribe(connection, frame);
      case "unsubscribe":
        if (!connection.rooms.has(frame.room)) {
          connection.sendRaw({ type: "error", room: frame.room, code: "not_subscribed", message: "the connection does not follow this room", id: frame.id });
          return;
        }
        this.#unfollow(connection, frame.room);
        connection.sendRaw({ type: "unsubscribed", room: frame.room });
        return;
      case "publish": {
        const { room, id } = frame;
        if (!connection.rooms.has(room)) {
          connection.sendRaw({ type: "error", room, code: "not_subscribed", message: "the connection does not follow this room", id });
          return;
        }
        const limit = this.#options.maxMessageBytes ?? 65_536;
        if (Buffer.byteLength(JSON.stringify(frame.data)) > limit) {
          connection.sendRaw({ type: "error", room, code: "too_large", message: `message data over ${limit} bytes as JSON`, id });
          return;
        }
        const [message] = this.publish(room, frame.data);
        connection.sendRaw({ type: "published", room, id, seq: message!.seq });
        return;
      }
      case "auth": {
        const exp = (this.#options.expiryOf ?? jwtExpiry)(frame.token);
        if (exp === null) {
          connection.sendRaw({ type: "error", code: "unauthorized", message: "the token is not valid" });
          return;
        }
        connection.token = frame.token;
        for (const room of [...connection.rooms]) {
          if (this.#grants(connection, room)) continue;
          this.#unfollow(connection, room);
          connection.sendRaw({ type: "unsubscribed", room, code: "forbidden", reason: "the new token does not grant this room" });
        }
        connection.sendRaw({ type: "authorized", exp });
        return;
      }
    }
  }

  #subscribe(connection: FakeMultiplexConnection, frame: SubscribeFrame): void {
    const { room: name, id } = frame;
    const refuse = (code: "rate_limited" | "forbidden" | "too_many_rooms" | "bad_request", message: string) =>
      connection.sendRaw({ type: "error", room: name, code, message, id });
    if (!connection.subscribeBudget!.take()) return refuse("rate_limited", "subscribes over the connection's subscribe rate");
    if (connection.rooms.has(name)) return refuse("bad_request", "the connection already follows this room");
    if (!this.#grants(connection, name)) return refuse("forbidden", "the token does not grant this room");
    if (connection.rooms.size >= (this.#options.maxRooms ?? 100)) return refuse("too_many_rooms", "the connection follows the most rooms it may");
    const room = this.room(name);
    connection.rooms.add(name);
    connection.sendRaw({ type: "subscribed", room: name, seq: room.seq, epoch: room.epoch });
    connection.position.set(name, frame.since !== undefined && frame.epoch === room.epoch ? Math.min(frame.since, room.seq) : room.seq);
    if (frame.since !== undefined) {
      if (frame.epoch !== room.epoch || frame.since > room.seq) {
        connection.sendRaw({ type: "lost", room: name, reason: "epoch", from: 1, to: room.seq });
        connection.position.set(name, room.seq);
      } else {
        const missed = room.history.filter((m) => m.seq > frame.since!).map((m) => ({ ...m, room: name }));
        if (missed.length > 0) this.#deliver(connection, name, missed);
      }
    }
    this.#sendPresence(connection, name, { type: "presence", action: "sync", count: room.members.length, members: room.members });
  }

  #unfollow(connection: FakeMultiplexConnection, room: string): void {
    connection.rooms.delete(room);
    // What was in flight for the room no longer holds the window.
    for (const f of connection.frames) if (f.room === room) f.released = true;
    connection.position.delete(room);
    for (let i = connection.waiting.length - 1; i >= 0; i--) if (connection.waiting[i]!.room === room) connection.waiting.splice(i, 1);
    this.#drain(connection);
  }

  #grants(connection: FakeMultiplexConnection, room: string): boolean {
    return this.#options.grants?.(connection.token, room) ?? true;
  }

  #notify(): void {
    this.#waiters.notify();
  }
}

/** A JWT's `exp`, or an hour from now for a token that is no JWT. */
function jwtExpiry(token: string): number {
  try {
    const claims = JSON.parse(Buffer.from(token.split(".")[1]!, "base64url").toString()) as { exp?: unknown };
    if (typeof claims.exp === "number") return claims.exp;
  } catch {
    // Not a JWT.
  }
  return Math.floor(Date.now() / 1000) + 3600;
}

/** A token shaped like a JWT (unsigned) with these claims: what the client reads its expiry from. */
export function fakeJwt(claims: Record<string, unknown>): string {
  const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
  return `${part({ alg: "none", typ: "JWT" })}.${part(claims)}.signature`;
}
