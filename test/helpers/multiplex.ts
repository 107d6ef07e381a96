import WebSocket from "ws";
import { parseServerFrame, type MultiplexEvent, type RoomScoped, type ServerMessage } from "../../protocol";
import type { CloseInfo } from "./socket";
import { Waiters } from "./wait";

type Message = RoomScoped<ServerMessage>;

/**
 * A raw client of the multiplexed connection (`GET /ws`) for tests: records
 * every event in order and how the socket closed, keeps each room's read
 * position, and (unless told not to) acknowledges each frame for its room,
 * naming its last message or presence event with the room's tag.
 */
export class MuxSocket {
  readonly ws: WebSocket;
  readonly events: MultiplexEvent[] = [];
  readonly closed: Promise<CloseInfo>;
  closeInfo: CloseInfo | null = null;
  /** Each room's last read seq (subscribed, lost, message): what its acks and resumes name. */
  readonly readSeq = new Map<string, number>();
  readonly epochs = new Map<string, string>();
  autoAck: boolean;
  #waiters = new Waiters();

  private constructor(ws: WebSocket, autoAck: boolean) {
    this.ws = ws;
    this.autoAck = autoAck;
    this.closed = new Promise((resolve) => {
      const settle = (code: number, reason: string) => {
        if (this.closeInfo) return;
        this.closeInfo = { code, reason };
        resolve(this.closeInfo);
        this.#waiters.notify();
      };
      ws.on("close", (code, reason) => settle(code, reason.toString()));
      ws.once("open", () => {
        const receiver = (ws as unknown as { _receiver?: NodeJS.EventEmitter })._receiver;
        receiver?.on("conclude", (code: number, reason: Buffer) => settle(code, reason.toString()));
      });
    });
    ws.on("message", (data) => this.#frame(data.toString()));
    ws.on("error", () => this.#waiters.notify());
  }

  static open(url: string, options: { autoAck?: boolean; protocols?: string[] } = {}): Promise<MuxSocket> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, options.protocols);
      const socket = new MuxSocket(ws, options.autoAck ?? true);
      ws.once("open", () => resolve(socket));
      ws.once("unexpected-response", (_req, res) => {
        // The refusal's JSON body says which one it was (over_capacity, shutting_down, ...).
        let body = "";
        res.on("data", (chunk: Buffer) => (body += chunk.toString()));
        res.on("end", () => reject(new Error(`upgrade refused: HTTP ${res.statusCode} ${body}`)));
        res.on("error", () => reject(new Error(`upgrade refused: HTTP ${res.statusCode}`)));
      });
      ws.once("error", reject);
    });
  }

  send(frame: unknown): void {
    this.ws.send(typeof frame === "string" ? frame : JSON.stringify(frame));
  }

  subscribe(room: string, resume: { since?: number; epoch?: string } = {}): void {
    if (resume.since !== undefined) this.readSeq.set(room, resume.since);
    if (resume.epoch !== undefined) this.epochs.set(room, resume.epoch);
    this.send({ type: "subscribe", room, ...resume });
  }

  /** Subscribes again to every room it followed, from where it read: what a client does after a reconnect. */
  resumeAll(into: MuxSocket): void {
    for (const [room, since] of this.readSeq) into.subscribe(room, { since, epoch: this.epochs.get(room) });
  }

  messages(room: string): Message[] {
    return this.events.filter((e): e is Message => e.type === "message" && e.room === room);
  }

  of<T extends MultiplexEvent["type"]>(type: T, room?: string): Extract<MultiplexEvent, { type: T }>[] {
    return this.events.filter((e) => e.type === type && (room === undefined || ("room" in e && e.room === room))) as Extract<MultiplexEvent, { type: T }>[];
  }

  waitFor(predicate: (socket: MuxSocket) => boolean, timeoutMs = 10_000, what = "condition"): Promise<void> {
    return this.#waiters.waitFor(() => predicate(this), { timeoutMs, what, detail: () => `last events: ${JSON.stringify(this.events.slice(-4))}` });
  }

  waitForMessages(room: string, count: number, timeoutMs = 10_000): Promise<void> {
    return this.waitFor((s) => s.messages(room).length >= count, timeoutMs, `${count} messages of ${room}`);
  }

  close(): void {
    this.ws.close(1000);
  }

  /** Stops reading from the TCP socket, so the kernel buffers fill and the server's sends pile up. */
  pauseReading(): void {
    (this.ws as unknown as { _socket: { pause(): void } })._socket.pause();
  }

  resumeReading(): void {
    (this.ws as unknown as { _socket: { resume(): void } })._socket.resume();
  }

  #frame(text: string): void {
    if (text === "pong") return this.#waiters.notify();
    const parsed = parseServerFrame(text);
    if (!parsed.ok) throw new Error(`server sent an invalid frame: ${text}`);
    const events = parsed.value as MultiplexEvent[];
    this.events.push(...events);
    const acks = new Map<string, { seq: number; tag: number }>();
    for (const event of events) {
      if (event.type === "subscribed") {
        if (!this.readSeq.has(event.room)) this.readSeq.set(event.room, event.seq);
        this.epochs.set(event.room, event.epoch);
      }
      if (event.type === "lost") this.readSeq.set(event.room, event.to);
      if (event.type === "message") {
        this.readSeq.set(event.room, event.seq);
        acks.set(event.room, { seq: event.seq, tag: event.tag });
      }
      if (event.type === "presence") acks.set(event.room, { seq: this.readSeq.get(event.room) ?? 0, tag: event.tag });
    }
    if (this.autoAck) for (const [room, ack] of acks) this.send({ type: "ack", room, ...ack });
    this.#waiters.notify();
  }
}
