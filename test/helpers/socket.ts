import WebSocket from "ws";
import { parseServerFrame, type ServerMessage, type PresenceEvent, type RoomStats, type ServerEvent } from "../../protocol";
import { Waiters } from "./wait";

export interface CloseInfo {
  code: number;
  reason: string;
}

export interface OpenOptions {
  /** Acknowledge every frame as it arrives, naming its last message (a well-behaved client). Default true. */
  autoAck?: boolean;
}

/**
 * A raw protocol client for tests: records every event the server sends,
 * in order, and how the socket closed.
 */
export class TestSocket {
  readonly ws: WebSocket;
  readonly events: ServerEvent[] = [];
  readonly frames: string[] = [];
  readonly closed: Promise<CloseInfo>;
  closeInfo: CloseInfo | null = null;
  /** The last message received: what an ack names. */
  lastMessage: ServerMessage | null = null;
  /** The seq this socket has read up to (welcome, lost, messages): what an ack of a presence event names. */
  readSeq = -1;
  #waiters = new Waiters();

  private constructor(ws: WebSocket, autoAck: boolean) {
    this.ws = ws;
    this.closed = new Promise((resolve) => {
      const settle = (code: number, reason: string) => {
        if (this.closeInfo) return;
        this.closeInfo = { code, reason };
        resolve(this.closeInfo);
        this.#waiters.notify();
      };
      ws.on("close", (code, reason) => settle(code, reason.toString()));
      // workerd may keep the TCP connection of a hibernatable socket open for
      // seconds after a completed close handshake, and ws reports "close" only
      // when TCP ends (30 s timeout). The close frame is what the server said.
      ws.once("open", () => {
        const receiver = (ws as unknown as { _receiver?: NodeJS.EventEmitter })._receiver;
        receiver?.on("conclude", (code: number, reason: Buffer) => settle(code, reason.toString()));
      });
    });
    ws.on("message", (data) => {
      const text = data.toString();
      this.frames.push(text);
      if (text === "pong") return this.#waiters.notify();
      const parsed = parseServerFrame(text);
      if (!parsed.ok) throw new Error(`server sent an invalid frame: ${text}`);
      this.events.push(...parsed.value);
      let ack: { seq: number; tag: number } | null = null;
      for (const event of parsed.value) {
        if (event.type === "welcome" && this.readSeq < 0) this.readSeq = event.seq;
        if (event.type === "lost") this.readSeq = event.to;
        if (event.type === "message") {
          this.readSeq = event.seq;
          this.lastMessage = event;
          ack = event;
        }
        if (event.type === "presence") ack = { seq: this.readSeq, tag: event.tag };
      }
      if (ack && autoAck) this.send({ type: "ack", seq: ack.seq, tag: ack.tag });
      this.#waiters.notify();
    });
    ws.on("error", () => this.#waiters.notify());
  }

  static open(url: string, options: OpenOptions = {}): Promise<TestSocket> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url);
      const socket = new TestSocket(ws, options.autoAck ?? true);
      const since = new URL(url).searchParams.get("since");
      if (since !== null) socket.readSeq = Number(since);
      ws.once("open", () => resolve(socket));
      ws.once("unexpected-response", (_req, res) => {
        // The refusal's JSON body says which one it was (over_capacity, room_full, ...).
        let body = "";
        res.on("data", (chunk: Buffer) => (body += chunk.toString()));
        res.on("end", () => reject(new Error(`upgrade refused: HTTP ${res.statusCode} ${body}`)));
        res.on("error", () => reject(new Error(`upgrade refused: HTTP ${res.statusCode}`)));
      });
      ws.once("error", reject);
    });
  }

  get messages(): ServerMessage[] {
    return this.events.filter((e): e is ServerMessage => e.type === "message");
  }

  get presence(): PresenceEvent[] {
    return this.events.filter((e): e is PresenceEvent => e.type === "presence");
  }

  /** Acknowledges `message` (default: the last one received) with its seq and tag. */
  ack(message: ServerMessage | null = this.lastMessage): void {
    if (message) this.send({ type: "ack", seq: message.seq, tag: message.tag });
  }

  send(frame: unknown): void {
    this.ws.send(typeof frame === "string" ? frame : JSON.stringify(frame));
  }

  /** Waits until `predicate` holds (re-checked on every frame), or fails after `timeoutMs`. */
  waitFor(predicate: (socket: TestSocket) => boolean, timeoutMs = 10_000, what = "condition"): Promise<void> {
    return this.#waiters.waitFor(() => predicate(this), { timeoutMs, what, detail: () => `last events: ${JSON.stringify(this.events.slice(-3))}` });
  }

  waitForMessages(count: number, timeoutMs = 10_000): Promise<void> {
    return this.waitFor((s) => s.messages.length >= count, timeoutMs, `${count} messages`);
  }

  /** Stops reading from the TCP socket, so the kernel buffers fill and the server's sends pile up. */
  pauseReading(): void {
    (this.ws as unknown as { _socket: { pause(): void } })._socket.pause();
  }

  close(): void {
    this.ws.close(1000);
  }
}

/** Publishes over HTTP and returns the parsed JSON answer with its status. */
export async function publish(
  baseUrl: string,
  room: string,
  data: unknown,
  options: { headers?: Record<string, string> } = {},
): Promise<{ status: number; body: { seq: number; recipients: number } & Record<string, unknown> }> {
  const res = await fetch(`${baseUrl}/rooms/${room}/publish`, {
    method: "POST",
    headers: { "content-type": "application/json", ...options.headers },
    body: JSON.stringify(data),
  });
  return { status: res.status, body: (await res.json()) as { seq: number; recipients: number } };
}

export async function roomStats(baseUrl: string, room: string): Promise<RoomStats> {
  const res = await fetch(`${baseUrl}/rooms/${room}`);
  return (await res.json()) as RoomStats;
}

/** Asserts-by-throwing that `messages` are exactly seqs from..to, each once, in order. */
export function expectSeqs(messages: ServerMessage[], from: number, to: number): void {
  const seqs = messages.map((m) => m.seq);
  const expected = Array.from({ length: to - from + 1 }, (_, i) => from + i);
  if (JSON.stringify(seqs) !== JSON.stringify(expected)) {
    throw new Error(`expected seqs ${from}..${to}, got ${JSON.stringify(seqs)}`);
  }
}

/** Attempts an upgrade that the server should refuse; returns the HTTP status and body it answered with. */
export function refusedUpgrade(url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    ws.once("open", () => {
      ws.close();
      reject(new Error(`expected ${url} to be refused, but it upgraded`));
    });
    ws.once("unexpected-response", (_req, res) => {
      let body = "";
      res.on("data", (chunk: Buffer) => (body += chunk.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    ws.once("error", (error) => reject(error));
  });
}
