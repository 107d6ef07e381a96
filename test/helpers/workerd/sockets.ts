/**
 * Real sockets for unit tests of the socket engine's parts, inside workerd:
 * each socket is a WebSocketPair whose server end the engine holds (as it
 * holds an accepted socket) and whose client end the test reads, so what a
 * part sends or how it closes is what a client would see on the wire.
 *
 * Workers-only (WebSocketPair): tsconfig.node.json leaves this folder out.
 */
import { parseServerFrame, type ServerEvent } from "../../../protocol";
import type { SocketAttachment } from "../../../durable-objects/engine/attachment";
import { MEMORY_ONLY, RoomCounters } from "../../../durable-objects/engine/counters";
import type { Cursor } from "../../../durable-objects/engine/cursor";
import { Delivery, type DeliveryEvents, type DeliveryOptions, type LeaveCause } from "../../../durable-objects/engine/delivery";
import { cutFrame, runOf, type BatchLimits, type Frame, type Run } from "../../../durable-objects/engine/frames";
import { messageEvent, TagSource, type Message } from "../../../durable-objects/engine/message";
import { SocketState } from "../../../durable-objects/engine/socket-state";
import { Stream, type MessageSource, type SourceRead } from "../../../durable-objects/engine/stream";
import { exports } from "cloudflare:workers";
import { until } from "../wait";

/**
 * A socket of room `room` opened through the project's worker as a client
 * opens one (`query`: `?since=...&epoch=...`), with every event it receives,
 * arrays unrolled.
 */
export async function openRoomSocket(room: string, query = ""): Promise<{ ws: WebSocket; events: ServerEvent[] }> {
  const worker = (exports as unknown as { default: { fetch(input: string, init?: RequestInit): Promise<Response> } }).default;
  const res = await worker.fetch(`http://edge.test/rooms/${room}/ws${query}`, { headers: { Upgrade: "websocket" } });
  if (res.status !== 101) throw new Error(`upgrade of ${room} answered ${res.status}: ${await res.text()}`);
  const ws = res.webSocket as WebSocket;
  const events: ServerEvent[] = [];
  ws.addEventListener("message", (e) => {
    const parsed: unknown = JSON.parse(e.data as string);
    events.push(...((Array.isArray(parsed) ? parsed : [parsed]) as ServerEvent[]));
  });
  ws.accept();
  return { ws, events };
}

export interface CloseSeen {
  code: number;
  reason: string;
}

/** The client end of a pair: every frame the server end sent, and how it closed. */
export class Peer {
  readonly ws: WebSocket;
  /** Frames as sent, in order (a `pong` too). */
  readonly frames: string[] = [];
  closed: CloseSeen | null = null;

  constructor(ws: WebSocket) {
    this.ws = ws;
    ws.accept();
    ws.addEventListener("message", (event) => {
      this.frames.push(String(event.data));
    });
    ws.addEventListener("close", (event) => {
      this.closed = { code: event.code, reason: event.reason };
    });
  }

  /** The events of every JSON frame received, arrays unrolled. */
  get events(): ServerEvent[] {
    return this.frames.filter((f) => f !== "pong").flatMap((frame) => {
      const parsed = parseServerFrame(frame);
      if (!parsed.ok) throw new Error(`the server end sent something that is not protocol: ${frame}`);
      return parsed.value;
    });
  }

  /** Frames reach the client end a turn after they are sent: waits until `check` holds. */
  async waitFor(check: (peer: Peer) => boolean, what = "frames"): Promise<void> {
    await until(() => check(this), { what });
  }

  /** Waits for the close and returns it. */
  async closing(): Promise<CloseSeen> {
    await until(() => this.closed !== null, { what: "the close" });
    return this.closed as CloseSeen;
  }

  /** Events of one type. */
  of<T extends ServerEvent["type"]>(type: T): Extract<ServerEvent, { type: T }>[] {
    return this.events.filter((e): e is Extract<ServerEvent, { type: T }> => e.type === type);
  }
}

/** The event `settled` sends: an application event, so no part of the engine reads it. */
export const SETTLED = "x-settled";

let marks = 0;

/**
 * Waits until everything `delivery` sent so far has reached each
 * connection's client end (a marker sent last arrives last), so a test can
 * say what did not arrive. Sockets that already left are skipped.
 */
export async function settled(delivery: Delivery, connections: ReadonlyArray<{ socket: SocketState; peer: Peer }>): Promise<void> {
  for (const { socket, peer } of connections) {
    if (delivery.get(socket.ws) !== socket) continue;
    marks += 1;
    const mark = marks;
    delivery.sendControl(socket, JSON.stringify({ type: SETTLED, mark }));
    await peer.waitFor((p) => p.events.some((e) => e.type === SETTLED && e.mark === mark), "the settle marker");
  }
}

let attachmentsMade = 0;

/** An attachment as the edge would write it for a socket that may publish and has no token. */
export function attachmentOf(fields: Partial<SocketAttachment> = {}): SocketAttachment {
  attachmentsMade += 1;
  return { id: `socket-${attachmentsMade}`, connectedAt: Date.now(), canPublish: true, expiresAt: null, ...fields };
}

/** A socket the engine holds (the accepted server end, with its state) and the client end that reads it. */
export function socketPair(attachment: SocketAttachment = attachmentOf()): { socket: SocketState; peer: Peer } {
  const pair = new WebSocketPair();
  const peer = new Peer(pair[0]);
  const server = pair[1];
  server.accept();
  return { socket: new SocketState(server, attachment), peer };
}

/**
 * A room's messages in memory, as its history would serve them: the source a
 * stream reads catch-up from. `forget` ages the oldest out, as a bounded
 * history does: a read from before them reports them lost.
 */
export class MemorySource implements MessageSource {
  readonly messages: Message[] = [];
  /** Seqs up to this one are no longer held. */
  #forgotten = 0;

  get seq(): number {
    return Math.max(this.messages[this.messages.length - 1]?.seq ?? 0, this.#forgotten);
  }

  /** The oldest seq still held (null when none is). */
  oldest(): number | null {
    return this.messages[0]?.seq ?? null;
  }

  /** Stores `count` messages after the latest (data `{"n":seq}`, tagged with their seq) and returns them. */
  add(count: number): Message[] {
    const added = Array.from({ length: count }, (_, i) => {
      const seq = this.seq + 1 + i;
      return messageEvent(seq, JSON.stringify({ n: seq }), Date.now(), seq);
    });
    this.messages.push(...added);
    return added;
  }

  /** Messages up to `through` age out. */
  forget(through: number): void {
    this.#forgotten = Math.max(this.#forgotten, through);
    while ((this.messages[0]?.seq ?? Number.POSITIVE_INFINITY) <= through) this.messages.shift();
  }

  read(from: number, budget: number): SourceRead {
    const lost = from <= this.#forgotten ? { from, to: this.#forgotten } : null;
    const runs: Run[] = [];
    let taken = 0;
    let next = lost ? lost.to + 1 : from;
    for (const message of this.messages) {
      if (message.seq < next || taken >= budget) continue;
      runs.push(runOf(message));
      taken += message.bytes;
      next = message.seq + 1;
    }
    return { runs, lost, nextSeq: next, nextRow: 0, rowsRead: 0 };
  }
}

export interface RigOptions extends Partial<Omit<DeliveryOptions, "batch">> {
  batch?: BatchLimits;
}

/**
 * One room on one object without the object: a Delivery with its counters,
 * a stream over a MemorySource, and what Delivery reported to the object
 * around it. `events` adds to (or replaces) those reports, as the engine
 * wires presence and hooks to them.
 */
export class DeliveryRig {
  readonly counters = new RoomCounters(MEMORY_ONLY);
  readonly source = new MemorySource();
  readonly stream: Stream;
  readonly delivery: Delivery;
  readonly left: Array<{ socket: SocketState; cause: LeaveCause }> = [];
  readonly released: SocketState[] = [];
  readonly #tags = new TagSource();
  readonly #batch: BatchLimits;

  constructor(options: RigOptions = {}, events: Partial<DeliveryEvents> = {}) {
    this.#batch = options.batch ?? { maxBytes: 64 * 1024, maxEvents: 256 };
    this.stream = new Stream("rig", this.source);
    this.delivery = new Delivery(
      this.counters,
      { windowBytes: options.windowBytes ?? 1 << 20, graceMs: options.graceMs ?? 10_000, batch: this.#batch },
      {
        occupancyChanged: () => {},
        left: (socket, cause) => {
          this.left.push({ socket, cause });
        },
        released: (socket) => {
          this.released.push(socket);
        },
        name: () => "rig",
        ...events,
      },
    );
  }

  /** A socket joins and follows the room, level with it. */
  connect(attachment: SocketAttachment = attachmentOf()): { socket: SocketState; cursor: Cursor; peer: Peer } {
    const { socket, peer } = socketPair(attachment);
    this.delivery.join(socket);
    const cursor = this.delivery.follow(socket, this.stream, this.stream.flushedSeq, Date.now());
    return { socket, cursor, peer };
  }

  /** Waits until everything sent so far has reached each connection's client end (see `settled`). */
  settled(...connections: ReadonlyArray<{ socket: SocketState; peer: Peer }>): Promise<void> {
    return settled(this.delivery, connections);
  }

  /** Publishes one message of `data` live: stored in the source, then fanned out as one frame. Returns it. */
  publish(data: unknown): { message: Message; frame: Frame; sentTo: number } {
    const { messages, frame, sentTo } = this.publishTogether([data]);
    return { message: messages[0] as Message, frame, sentTo };
  }

  /** Publishes a message of each of `data` live in one frame, as a flush that coalesced them does. */
  publishTogether(data: readonly unknown[]): { messages: Message[]; frame: Frame; sentTo: number } {
    const messages = data.map((each, i) => messageEvent(this.source.seq + 1 + i, JSON.stringify(each), Date.now(), this.#tags.next()));
    this.source.messages.push(...messages);
    const { frame } = cutFrame(messages.map(runOf), 0, this.#batch);
    const sentTo = this.delivery.fanOut(this.stream, frame, 0, Date.now());
    return { messages, frame, sentTo };
  }
}
