import WebSocket from "ws";
import { parseServerFrame, type MultiplexEvent, type ServerEvent, type ServerMessage, type SubscribeFrame, type WelcomeEvent } from "../../protocol/index.js";

/** How a socket ended, as its close frame said. */
export interface CloseInfo {
  code: number;
  reason: string;
  /** ms since the peer opened. */
  at: number;
}

/** An event as the server sent it; on a multiplexed connection every room-scoped one names its `room`. */
export type PeerEvent = (ServerEvent & { room?: string }) | MultiplexEvent;

export interface PeerOptions {
  /** Acknowledge the last message (or presence event) of every frame as it arrives: a well-behaved client. */
  autoAck: boolean;
  /** Sec-WebSocket-Protocol offers (a token travels as `token.<jwt>` beside `fanout.v1`). */
  protocols?: string[];
  headers?: Record<string, string>;
  /** Give up opening after this long. */
  timeoutMs?: number;
}

function isSubscribe(frame: unknown): frame is SubscribeFrame {
  return typeof frame === "object" && frame !== null && (frame as SubscribeFrame).type === "subscribe" && typeof (frame as SubscribeFrame).room === "string";
}

/** The room an event names (multiplexed connections), if any. */
export function roomOf(event: PeerEvent): string | undefined {
  return "room" in event && typeof event.room === "string" ? event.room : undefined;
}

/** What an upgrade answered when it was not a socket. */
export class RefusedUpgrade extends Error {
  constructor(
    readonly status: number,
    readonly body: string,
  ) {
    super(`upgrade refused with HTTP ${status}: ${body.slice(0, 200)}`);
  }
}

/**
 * A black-box protocol client: records every event the server sends, in
 * order, the bytes of every frame, and how the socket closed; acknowledges
 * frames as the protocol's raw client does (rule 2) while `autoAck` is on.
 * Works for a room's socket and for a multiplexed connection (acks name the
 * event's room there).
 */
export class Peer {
  readonly events: PeerEvent[] = [];
  /** Server frames that were not protocol (not JSON, not events): a violation a check reports. */
  readonly violations: string[] = [];
  /** Bytes of every message-carrying frame received, in order. */
  readonly messageFrameBytes: number[] = [];
  autoAck: boolean;
  /** Heartbeat answers received. */
  pongs = 0;
  closeInfo: CloseInfo | null = null;
  readonly closed: Promise<CloseInfo>;
  /** The seq read last per room ("" for a room's own socket): what a presence ack names. */
  readonly readSeq = new Map<string, number>();
  /** The last ack this peer could send: the last message or presence event it read. */
  #pendingAck: { room?: string; seq: number; tag: number } | null = null;
  #waiters = new Set<() => void>();
  readonly #openedAt = Date.now();

  private constructor(
    readonly ws: WebSocket,
    options: PeerOptions,
    readonly url: string,
  ) {
    this.autoAck = options.autoAck;
    // A resume's welcome names the room's latest seq; what this socket has read is its `since`.
    const since = new URL(url).searchParams.get("since");
    if (since !== null && /^\d+$/.test(since)) this.readSeq.set("", Number(since));
    this.closed = new Promise((resolve) => {
      const settle = (code: number, reason: string) => {
        if (this.closeInfo) return;
        this.closeInfo = { code, reason, at: Date.now() - this.#openedAt };
        resolve(this.closeInfo);
        this.#notify();
      };
      ws.on("close", (code, reason) => settle(code, reason.toString()));
      // workerd may keep a closed hibernatable socket's TCP connection open for
      // seconds, and ws reports "close" only when TCP ends: the close frame is
      // what the server said, so it is taken as the close.
      ws.once("open", () => {
        const receiver = (ws as unknown as { _receiver?: NodeJS.EventEmitter })._receiver;
        receiver?.on("conclude", (code: number, reason: Buffer) => settle(code, reason.toString()));
      });
    });
    ws.on("message", (data, isBinary) => this.#onFrame(isBinary ? null : data.toString()));
    ws.on("error", () => this.#notify());
  }

  /** Opens a socket; rejects with RefusedUpgrade when the server answered with a status instead. */
  static open(url: string, options: PeerOptions): Promise<Peer> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, options.protocols ?? [], { headers: options.headers, handshakeTimeout: options.timeoutMs ?? 10_000 });
      const peer = new Peer(ws, options, url);
      ws.once("open", () => resolve(peer));
      ws.once("unexpected-response", (_req, res) => {
        let body = "";
        res.on("data", (chunk: Buffer) => (body += chunk.toString()));
        res.on("end", () => reject(new RefusedUpgrade(res.statusCode ?? 0, body)));
        res.on("error", () => reject(new RefusedUpgrade(res.statusCode ?? 0, body)));
      });
      ws.once("error", reject);
    });
  }

  #onFrame(text: string | null): void {
    if (text === null) {
      this.violations.push("binary frame from the server");
      return this.#notify();
    }
    if (text === "pong") {
      this.pongs++;
      return this.#notify();
    }
    const parsed = parseServerFrame(text);
    if (!parsed.ok) {
      this.violations.push(`${parsed.error}: ${text.slice(0, 120)}`);
      return this.#notify();
    }
    let carriesMessage = false;
    for (const event of parsed.value as PeerEvent[]) {
      this.events.push(event);
      const room = roomOf(event) ?? "";
      // A room's welcome names its room, but its messages do not: its position is kept under "".
      if (event.type === "welcome" && "seq" in event && !this.readSeq.has("")) this.readSeq.set("", event.seq);
      if (event.type === "subscribed" && !this.readSeq.has(room)) this.readSeq.set(room, event.seq);
      if (event.type === "lost") this.readSeq.set(room, event.to);
      if (event.type === "message") {
        carriesMessage = true;
        this.readSeq.set(room, event.seq);
        this.#pendingAck = { room: roomOf(event), seq: event.seq, tag: event.tag };
      }
      if (event.type === "presence") this.#pendingAck = { room: roomOf(event), seq: this.readSeq.get(room) ?? 0, tag: event.tag };
    }
    if (carriesMessage) this.messageFrameBytes.push(Buffer.byteLength(text));
    if (this.autoAck) this.ackNow();
    this.#notify();
  }

  /** Acknowledges the last message or presence event read, once. */
  ackNow(): void {
    const ack = this.#pendingAck;
    if (!ack || this.ws.readyState !== WebSocket.OPEN) return;
    this.#pendingAck = null;
    this.send(ack.room === undefined ? { type: "ack", seq: ack.seq, tag: ack.tag } : { type: "ack", room: ack.room, seq: ack.seq, tag: ack.tag });
  }

  /** The messages received (of one room on a multiplexed connection, when `room` is given). */
  messages(room?: string): ServerMessage[] {
    return this.events.filter((e): e is ServerMessage & { room?: string } => e.type === "message" && (room === undefined || roomOf(e) === room));
  }

  /** A room socket's welcome (it names the room's seq and epoch), once it came. */
  welcome(): WelcomeEvent | undefined {
    return this.events.find((e): e is WelcomeEvent => e.type === "welcome" && "epoch" in e);
  }

  /** Waits for the first event of the socket (a room's welcome, or a connection's). */
  waitForWelcome(timeoutMs = 10_000): Promise<void> {
    return this.waitFor((p) => p.ofType("welcome").length > 0, timeoutMs, "a welcome");
  }

  /** Events of one type (of one room, when given). */
  ofType<K extends PeerEvent["type"]>(type: K, room?: string): Extract<PeerEvent, { type: K }>[] {
    return this.events.filter((e) => e.type === type && (room === undefined || roomOf(e) === room)) as Extract<PeerEvent, { type: K }>[];
  }

  send(frame: unknown): void {
    // A subscription that resumes has read up to its `since`, whatever `subscribed` says of the room.
    if (isSubscribe(frame)) {
      if (typeof frame.since === "number") this.readSeq.set(frame.room, frame.since);
      else this.readSeq.delete(frame.room);
    }
    if (this.ws.readyState === WebSocket.OPEN) this.ws.send(typeof frame === "string" ? frame : JSON.stringify(frame));
  }

  /** Waits until `predicate` holds (checked on every frame and on close); throws a readable error after `timeoutMs`. */
  async waitFor(predicate: (peer: Peer) => boolean, timeoutMs: number, what: string): Promise<void> {
    if (predicate(this)) return;
    await new Promise<void>((resolve, reject) => {
      const check = () => {
        if (!predicate(this)) return;
        clearTimeout(timer);
        this.#waiters.delete(check);
        resolve();
      };
      const timer = setTimeout(() => {
        this.#waiters.delete(check);
        const tail = JSON.stringify(this.events.slice(-2)).slice(0, 300);
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}${this.closeInfo ? ` (closed ${this.closeInfo.code})` : ""}; last events: ${tail}`));
      }, timeoutMs);
      this.#waiters.add(check);
    });
  }

  /** Waits for `count` messages (of `room`, when given). */
  waitForMessages(count: number, timeoutMs: number, room?: string): Promise<void> {
    return this.waitFor((p) => p.messages(room).length >= count, timeoutMs, `${count} messages${room ? ` of ${room}` : ""}`);
  }

  /** Waits for the close frame, at most `timeoutMs`; null when none came. */
  async waitForClose(timeoutMs: number): Promise<CloseInfo | null> {
    await this.waitFor((p) => p.closeInfo !== null, timeoutMs, "the socket's close").catch(() => undefined);
    return this.closeInfo;
  }

  /** Closes on purpose (1000). */
  close(): void {
    if (this.ws.readyState === WebSocket.CONNECTING || this.ws.readyState === WebSocket.OPEN) this.ws.close(1000);
    else if (this.ws.readyState !== WebSocket.CLOSED) this.ws.terminate();
  }

  /** Drops the TCP connection without a close frame: what a lost network looks like to the server. */
  drop(): void {
    this.ws.terminate();
  }

  /** Ends the socket for good (cleanup): a close frame, then the TCP connection shortly after. */
  dispose(): void {
    this.close();
    setTimeout(() => this.ws.terminate(), 500).unref();
  }

  #notify(): void {
    for (const waiter of [...this.#waiters]) waiter();
  }
}
