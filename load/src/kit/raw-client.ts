/**
 * A client of one room as docs/protocol.md's raw client is: it pings, acks
 * what it read (with the tag, so the ack proves it), and after a close whose
 * code allows it, resumes with `since` and `epoch`. The benchmarks that hold
 * sockets in their own process use it, each with its own way to ack and to
 * record what it read.
 */
import type { EventEmitter } from "node:events";
import { WebSocket } from "ws";
import { PING, PING_INTERVAL_SECONDS, PONG, shouldReconnect } from "../../../protocol";

/**
 * frame: an ack after every frame that carried a message; quarter: once a quarter of the window is
 * unacknowledged; raw: per half window, or 50 ms after a frame (docs/protocol.md's raw client); none: never.
 */
export type AckPolicy = "frame" | "quarter" | "raw" | "none";

/** An event as read: the protocol's fields, loosely, since a benchmark reads its own data out of them. */
export interface RawEvent {
  type: string;
  seq?: number;
  tag?: number;
  epoch?: string;
  window?: number;
  from?: number;
  to?: number;
  reason?: string;
  code?: string;
  data?: unknown;
  [field: string]: unknown;
}

export interface RawClientOptions {
  ack?: AckPolicy;
  /** Reconnect after a close that allows it, after a random delay up to this many ms; absent: stay closed. */
  reconnectWithinMs?: number;
  /** Connect the first time already resuming from this seq (`since`). */
  since?: number;
  /** Read message frames without parsing their data: a resume of gigabytes must measure the server, not JSON.parse. */
  skim?: boolean;
  /** Every event read, after the client's own bookkeeping. */
  onEvent?: (event: RawEvent, frameBytes: number) => void;
  /** Every frame read, before its events. */
  onFrame?: (text: string) => void;
}

/** Matches a message event whose fields the service writes seq first and tag last. */
const MESSAGE = /\{"type":"message","seq":(\d+),.*?(?:,"tag":(\d+))?\}(?=,\{"type"|\]?$)/gs;

/** A frame's events; skimmed, a message frame yields only type, seq and tag (and of a large one only its head and tail are read). */
export function eventsOf(data: Buffer, skim: boolean): RawEvent[] {
  let text: string;
  if (skim && data.length >= 8192 && data[0] === 0x7b /* { */) {
    text = `${data.subarray(0, 64).toString("latin1").replace(/,"data":.*$/s, "")},"data":0${data.subarray(data.length - 64).toString("latin1").replace(/^.*?(,"ts":)/s, "$1")}`;
  } else text = data.toString();
  if (skim && (text.startsWith('{"type":"message"') || text.startsWith('[{"type":"message"'))) {
    return [...text.matchAll(MESSAGE)].map((m) => ({ type: "message", seq: Number(m[1]), ...(m[2] === undefined ? {} : { tag: Number(m[2]) }) }));
  }
  try {
    const parsed = JSON.parse(text) as RawEvent | RawEvent[];
    return Array.isArray(parsed) ? parsed : [parsed];
  } catch {
    // A frame that is not the protocol's JSON is a finding for the benchmark, not a crash of it.
    return [{ type: "invalid", text: text.slice(0, 80) }];
  }
}

export class RawClient {
  /** Messages read, those not one past the previous one, frames and bytes read, close codes seen, connections made. */
  received = 0;
  outOfOrder = 0;
  frames = 0;
  bytes = 0;
  readonly closes: number[] = [];
  connects = 0;
  /** Where a resume starts (the newest seq read) and the epoch it belongs to. */
  since: number | null;
  epoch: string | null = null;
  window = 1 << 20;
  ws: WebSocket | null = null;
  private stopped = false;

  constructor(
    readonly url: string,
    private readonly options: RawClientOptions = {},
  ) {
    this.since = options.since ?? null;
  }

  /** Opens the socket; resolves on its welcome. */
  open(): Promise<this> {
    return new Promise((resolve, reject) => {
      const url = new URL(this.url);
      if (this.since !== null) url.searchParams.set("since", String(this.since));
      if (this.since !== null && this.epoch !== null) url.searchParams.set("epoch", this.epoch);
      const ws = new WebSocket(url, { perMessageDeflate: false, handshakeTimeout: 15_000 });
      this.ws = ws;
      this.connects++;
      const policy = this.options.ack ?? "raw";
      let last: { seq: number; tag: number } | null = null;
      let unacked = 0;
      let ackTimer: ReturnType<typeof setTimeout> | undefined;
      let welcome: RawEvent | null = null;
      const ack = (): void => {
        clearTimeout(ackTimer);
        ackTimer = undefined;
        unacked = 0;
        if (last && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: "ack", seq: last.seq, tag: last.tag }));
        last = null;
      };
      const pinger = setInterval(() => ws.readyState === WebSocket.OPEN && ws.send(PING), PING_INTERVAL_SECONDS * 1000);
      ws.on("message", (data: Buffer) => {
        if (data.length === PONG.length && data.toString() === PONG) return;
        this.frames++;
        this.bytes += data.length;
        this.options.onFrame?.(data.toString());
        for (const event of eventsOf(data, this.options.skim ?? false)) {
          if (event.type === "welcome") {
            welcome = event;
            this.window = event.window || this.window;
            this.since ??= event.seq ?? 0;
            this.epoch ??= event.epoch ?? null;
            resolve(this);
          } else if (event.type === "message" && event.seq !== undefined) {
            if (this.since !== null && event.seq !== this.since + 1) this.outOfOrder++;
            this.since = event.seq;
            this.received++;
            if (event.tag !== undefined) last = { seq: event.seq, tag: event.tag };
          } else if (event.type === "lost" && event.to !== undefined) {
            this.since = event.to;
            if (event.reason === "epoch") this.epoch = welcome?.epoch ?? this.epoch;
          } else if (event.type === "presence" && event.tag !== undefined && this.since !== null) {
            last = { seq: this.since, tag: event.tag };
          }
          this.options.onEvent?.(event, data.length);
        }
        unacked += data.length;
        if (!last || policy === "none") return;
        if (policy === "frame" || (policy === "quarter" && unacked * 4 >= this.window) || (policy === "raw" && unacked * 2 >= this.window)) ack();
        else if (policy === "raw") ackTimer ??= setTimeout(ack, 50);
      });
      ws.on("error", reject);
      let concluded = false;
      const conclude = (code: number): void => {
        if (concluded) return;
        concluded = true;
        clearInterval(pinger);
        clearTimeout(ackTimer);
        if (this.ws === ws) this.ws = null;
        this.closes.push(code);
        const within = this.options.reconnectWithinMs;
        if (within !== undefined && !this.stopped && shouldReconnect(code)) setTimeout(() => void this.open().catch(() => undefined), Math.random() * within);
      };
      ws.on("close", (code: number) => conclude(code));
      // ws reports "close" only once TCP ends, which the runtime may hold open a while: the close frame is what the server said.
      ws.once("open", () => (ws as unknown as { _receiver?: EventEmitter })._receiver?.on("conclude", (code: number) => conclude(code)));
    });
  }

  /** Stops reading: the kernel buffers fill and the server sees a stalled reader. */
  pause(): void {
    this.ws?.pause();
  }

  resume(): void {
    this.ws?.resume();
  }

  send(frame: unknown): void {
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(typeof frame === "string" ? frame : JSON.stringify(frame));
  }

  /** Cuts the TCP connection: no close frame, as a lost network. */
  cut(): void {
    this.ws?.terminate();
  }

  /** Closes with 1000 and never reconnects; resolves once closed (or cut, when the close handshake takes over 2 s). */
  close(): Promise<void> {
    this.stopped = true;
    const ws = this.ws;
    if (!ws || ws.readyState === WebSocket.CLOSED) return Promise.resolve();
    return new Promise((resolve) => {
      ws.once("close", () => resolve());
      ws.close(1000);
      setTimeout(() => {
        ws.terminate();
        resolve();
      }, 2000).unref();
    });
  }
}
