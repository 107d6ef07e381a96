/**
 * A real object's state for unit tests of the parts that run on one (the
 * socket engine, the sweeper, a room's webhook storage), inside workerd:
 * `inObject` runs a test body inside a fresh object of the worker, and
 * `EngineRig` is a socket engine on that object's state, with a host the
 * test reads and steers. The sockets it accepts are the runtime's own
 * (acceptWebSocket, auto-responses, attachments); their client ends are
 * Peers that record what a client would see.
 *
 * The object lent is a leaf (LEAVES) named for no room the test uses: it
 * stores nothing and has no work of its own on its alarm, so its own parts
 * leave the test's alone. Frames a client end sends reach that object's
 * handlers, which ignore sockets they did not accept: a test hands a frame
 * to the engine under test with `EngineRig.frame`, as the runtime would.
 *
 * Workers-only (cloudflare:test, WebSocketPair): tsconfig.node.json leaves this folder out.
 */
import { env, runInDurableObject } from "cloudflare:test";
import type { ResumePoint } from "../../../protocol";
import { readLimits, type Limits } from "../../../common/settings";
import type { SocketAttachment } from "../../../durable-objects/engine/attachment";
import { MEMORY_ONLY, RoomCounters } from "../../../durable-objects/engine/counters";
import type { Cursor } from "../../../durable-objects/engine/cursor";
import { NO_FRAME_HOOKS, type FrameHooks } from "../../../durable-objects/engine/frame-hooks";
import { cutFrame, runOf } from "../../../durable-objects/engine/frames";
import type { Message } from "../../../durable-objects/engine/message";
import type { PublishOutcome } from "../../../durable-objects/engine/publish-outcome";
import { SocketEngine, type EngineHost, type SocketDialect } from "../../../durable-objects/engine/socket-engine";
import type { SocketState } from "../../../durable-objects/engine/socket-state";
import type { Stream } from "../../../durable-objects/engine/stream";
import { attachmentOf, Peer, settled, type MemorySource } from "./sockets";

const lenders = (env as unknown as { LEAVES: DurableObjectNamespace }).LEAVES;
let lent = 0;

/**
 * Runs `body` inside a fresh object, with its state: its storage (SQLite,
 * transactions, the alarm) and its sockets. Everything the body creates
 * (sockets, timers) belongs to that object, so the body does all its work,
 * waiting included, before it returns. An alarm the body set is taken back
 * afterwards, so it never fires into a later test.
 */
export async function inObject<T>(body: (state: DurableObjectState) => Promise<T> | T): Promise<T> {
  lent += 1;
  const stub = lenders.get(lenders.idFromName(`unit-${lent}-${crypto.randomUUID()}/0`));
  return runInDurableObject(stub, async (_instance, state) => {
    try {
      return await body(state);
    } finally {
      await state.storage.deleteAlarm();
    }
  });
}

/** Where a socket asks to start: at the room's present unless told otherwise. */
export function resumeOf(fields: Partial<ResumePoint> = {}): ResumePoint {
  return { since: null, epoch: null, rewind: null, ...fields };
}

/** A socket the engine accepted: its state there, and the client end. */
export interface Accepted {
  socket: SocketState;
  peer: Peer;
}

/**
 * A socket engine on a real object's state, as a room or a leaf builds it,
 * with a host that records what the engine tells it (occupancy, heartbeats,
 * publishes, the alarm's work) and wants its alarm when the test says (`workAt`).
 */
export class EngineRig implements EngineHost {
  readonly state: DurableObjectState;
  readonly counters = new RoomCounters(MEMORY_ONLY);
  readonly limits: Limits;
  readonly engine: SocketEngine;
  /** Occupancy changes the engine reported, in order. */
  readonly occupancy: number[] = [];
  /** The data (JSON text) of each publish a socket sent; each is published at the next seq. */
  readonly publishes: string[] = [];
  heartbeats = 0;
  /** Sockets of the room on other objects (a sharded room's leaves): the room is live while there are any. */
  elsewhere = 0;
  /** When the host wants its alarm for work of its own (null: never). */
  workAt: number | null = null;
  /** Alarms the host ran its own work in: their `now` and whether the room was live. */
  readonly worked: Array<{ now: number; live: boolean }> = [];

  constructor(state: DurableObjectState, limits: Partial<Limits> = {}, dialect?: SocketDialect) {
    this.state = state;
    this.limits = { ...readLimits({}), ...limits };
    this.engine = new SocketEngine(state, this.limits, this.counters, this, dialect);
  }

  /** Accepts a socket into `stream` as the object's fetch would, and opens its client end. */
  async accept(stream: Stream, resume: ResumePoint = resumeOf(), attachment: SocketAttachment = attachmentOf(), epoch = "epoch-1"): Promise<Accepted> {
    const response = await this.engine.accept(stream, { attachment, resume, epoch });
    if (response.status !== 101 || !response.webSocket) throw new Error(`the engine answered ${response.status}, not an upgrade`);
    const peer = new Peer(response.webSocket);
    const socket = [...this.engine.delivery.sockets()].find((s) => s.attachment.id === attachment.id);
    if (!socket) throw new Error("the engine does not hold the socket it accepted");
    return { socket, peer };
  }

  /**
   * Publishes `count` messages live into `stream`, whose source is `source`:
   * stored, then fanned out in frames as a flush cuts them. Returns them.
   */
  publish(stream: Stream, source: MemorySource, count = 1): Message[] {
    const messages = source.add(count);
    const runs = messages.map(runOf);
    const batch = { maxBytes: this.limits.BATCH_MAX_BYTES, maxEvents: this.limits.BATCH_MAX_EVENTS };
    for (let i = 0; i < runs.length; ) {
      const { frame, end } = cutFrame(runs, i, batch);
      this.engine.delivery.fanOut(stream, frame, 0, Date.now());
      i = end;
    }
    return messages;
  }

  /** The server ends the runtime holds for the object (what the Hibernation API hands back after a wake). */
  serverEnds(): WebSocket[] {
    return this.state.getWebSockets();
  }

  /** Waits until everything the engine sent so far has reached each connection's client end. */
  settled(...connections: readonly Accepted[]): Promise<void> {
    return settled(this.engine.delivery, connections);
  }

  /** A frame from the client of `socket`, handed to the engine as the runtime hands it to the object. */
  frame(socket: SocketState, frame: unknown): Promise<void> {
    return this.engine.message(socket.ws, typeof frame === "string" ? frame : JSON.stringify(frame));
  }

  // The engine's host.

  occupancyChanged(connections: number): void {
    this.occupancy.push(connections);
  }

  heartbeat(): void {
    this.heartbeats += 1;
  }

  otherSockets(): number {
    return this.elsewhere;
  }

  alarmWanted(): number | null {
    return this.workAt;
  }

  async onAlarm(now: number, live: boolean): Promise<void> {
    this.worked.push({ now, live });
  }

  name(): string {
    return "rig";
  }

  get hooks(): FrameHooks {
    return NO_FRAME_HOOKS;
  }

  async publishFrom(_cursor: Cursor, dataJson: string): Promise<PublishOutcome> {
    this.publishes.push(dataJson);
    return { seq: this.publishes.length, recipients: 0, duplicate: false };
  }
}

/**
 * The ack a client that read everything `peer` received sends: it names the
 * last message of the last frame of messages (an ack releases every frame
 * before the one it names). Null when no message arrived.
 */
export function ackOfAll(peer: Peer): { type: "ack"; seq: number; tag: number } | null {
  const last = peer.of("message").at(-1);
  return last ? { type: "ack", seq: last.seq, tag: last.tag } : null;
}
