import {
  CloseCode,
  PING,
  PONG,
  type ConnectionWelcomeEvent,
  type ErrorCode,
  type LostEvent,
  type ResumePoint,
  type SubscribedEvent,
  type UnsubscribedEvent,
  type WelcomeEvent,
} from "../../protocol";
import { logEvent } from "../../common/log";
import type { Limits } from "../../common/settings";
import type { SocketAttachment } from "./attachment";
import { ClientFrames, type FrameHost, type MultiplexFrames } from "./client-frames";
import type { RoomCounters } from "./counters";
import type { Cursor, FollowAs } from "./cursor";
import { Delivery, type LeaveCause } from "./delivery";
import { Presence, type PresenceSink } from "./presence";
import { SocketState, type RatePolicy } from "./socket-state";
import { Stream, type MessageSource } from "./stream";
import { ROOM_SHAPE, type StreamShape } from "./stream-shape";
import { Sweeper, type SweeperHost } from "./sweeper";

/** What a room's presence on this object needs beyond the engine: a sharded room counts members over several objects. */
export type PresenceHooks = Pick<PresenceSink, "memberChanged">;

/** What the engine asks of the object it runs in: its sweep, its publishes, and what it hears of sockets coming and going. */
export interface EngineHost extends SweeperHost, Omit<FrameHost, "persistAttachment"> {
  /** The object went from no sockets to some, or from some to none. */
  occupancyChanged(connections: number): void;
  /** A socket left (after its presence did), however it went. */
  left?(socket: SocketState, cause: LeaveCause): void;
  /**
   * Before a socket's frame is handled: whatever the object must know first (a leaf asks its
   * root where the room stands, since an ack is checked against the cursor). False when the
   * object closed the socket instead.
   */
  beforeFrame?(socket: SocketState): Promise<boolean>;
}

/** The heartbeat the runtime answers for the object without waking it: one request and its response per object. */
export interface Heartbeat {
  request: string;
  response: string;
}

/**
 * What an object whose sockets speak another protocol than this service's
 * changes in the engine (the Pusher front door's hubs: pusher/pusher-dialect.ts).
 * Everything else (windows, cursors, catch-up, presence, the sweep) is the same.
 */
export interface SocketDialect {
  heartbeat: Heartbeat;
  /** The code a socket is closed with, for each of CloseCode's (the engine speaks CloseCode). */
  closeCode?(code: number): number;
  /** For clients that do not acknowledge on their own: sends a request to, and marks it in the window (SendWindow.solicit). */
  solicit?(socket: SocketState): void;
  /** For clients that only speak after a quiet while: a sign of life is asked of one silent for half the idle timeout. */
  nudge?(socket: SocketState): void;
  /** Idle timeout, seconds, when not IDLE_TIMEOUT_SECONDS (a protocol whose clients ping less often). */
  idleTimeoutSeconds?: number;
  /** Events per frame, when not BATCH_MAX_EVENTS (1: a protocol without batches). */
  maxEventsPerFrame?: number;
}

/** This service's protocol: `ping`, answered `pong`. */
export const SERVICE_HEARTBEAT: Heartbeat = { request: PING, response: PONG };
export const SERVICE_DIALECT: SocketDialect = { heartbeat: SERVICE_HEARTBEAT };

/** A socket to accept: what the edge decided about it, where it resumes, and the history its seqs belong to. */
export interface Admission {
  attachment: SocketAttachment;
  resume: ResumePoint;
  /** The epoch of the room's history, as the welcome announces it. */
  epoch: string;
}

/**
 * The socket engine: everything an object that holds sockets does with them,
 * the same for a room, a leaf of a sharded room, and any other object that
 * holds sockets of rooms. It accepts sockets with the Hibernation API,
 * welcomes them, resumes them from `since` or tells them what they lost,
 * keeps a cursor per socket and room and a window per socket (Delivery),
 * runs presence per room (Presence), handles client frames (ClientFrames),
 * reaps idle sockets (Sweeper), and rebuilds all of it from the sockets'
 * attachments when the object wakes. No handler throws into the runtime.
 *
 * The object around it decides what is particular to it: where a room's
 * messages come from (`openStream`), where publishes go, what happens on its
 * alarm when it holds no sockets.
 */
export class SocketEngine {
  readonly #ctx: DurableObjectState;
  readonly #limits: Limits;
  readonly #counters: RoomCounters;
  readonly #host: EngineHost;
  readonly #rate: RatePolicy;
  readonly #presences = new Map<Stream, Presence>();
  readonly delivery: Delivery;
  readonly sweeper: Sweeper;
  readonly frames: ClientFrames;

  constructor(ctx: DurableObjectState, limits: Limits, counters: RoomCounters, host: EngineHost, dialect: SocketDialect = SERVICE_DIALECT) {
    this.#ctx = ctx;
    this.#limits = limits;
    this.#counters = counters;
    this.#host = host;
    this.#rate = { perSecond: limits.CLIENT_FRAMES_PER_SECOND, burst: Math.max(1, limits.CLIENT_FRAME_BURST) };
    this.delivery = new Delivery(
      counters,
      {
        windowBytes: limits.WINDOW_BYTES,
        graceMs: limits.SLOW_GRACE_MS,
        batch: { maxBytes: limits.BATCH_MAX_BYTES, maxEvents: dialect.maxEventsPerFrame ?? limits.BATCH_MAX_EVENTS },
        ...(dialect.closeCode ? { closeCode: (code: number) => dialect.closeCode?.(code) ?? code } : {}),
        ...(dialect.solicit ? { solicit: (socket: SocketState) => dialect.solicit?.(socket) } : {}),
      },
      {
        occupancyChanged: (connections) => host.occupancyChanged(connections),
        left: (socket, cause) => this.#left(socket, cause),
        released: (socket) => {
          for (const cursor of socket.cursors.values()) this.#presences.get(cursor.stream)?.refresh(cursor);
        },
        name: () => host.name(),
      },
    );
    this.frames = new ClientFrames(
      this.delivery,
      counters,
      { maxFrameBytes: limits.MAX_FRAME_BYTES, maxMessageBytes: limits.MAX_MESSAGE_BYTES, rate: this.#rate },
      {
        publishFrom: (cursor, dataJson, retry) => host.publishFrom(cursor, dataJson, retry),
        retried: host.retried ? (retry) => host.retried?.(retry) ?? null : undefined,
        get hooks() {
          return host.hooks;
        },
        persistAttachment: (socket) => socket.ws.serializeAttachment(socket.attachment),
        name: () => host.name(),
        multiplexed: host.multiplexed,
        foreign: host.foreign,
      },
    );
    this.sweeper = new Sweeper(
      ctx,
      this.delivery,
      counters,
      {
        idleTimeoutMs: (dialect.idleTimeoutSeconds ?? limits.IDLE_TIMEOUT_SECONDS) * 1000,
        ...(dialect.nudge ? { nudge: (socket: SocketState) => dialect.nudge?.(socket) } : {}),
      },
      host,
    );
    // Heartbeats are answered by the runtime, so a pinging client never wakes the object.
    ctx.setWebSocketAutoResponse(new WebSocketRequestResponsePair(dialect.heartbeat.request, dialect.heartbeat.response));
  }

  /** Sockets on this object. */
  get size(): number {
    return this.delivery.size;
  }

  /**
   * A room whose sockets this object will hold, its messages read from
   * `source`, its events in `shape` (multiplexed connections: every event
   * names the room).
   */
  openStream(room: string, source: MessageSource, presence: PresenceHooks = {}, shape: StreamShape = ROOM_SHAPE, counters: RoomCounters | null = null): Stream {
    const stream = new Stream(room, source, shape, counters);
    this.#presences.set(
      stream,
      new Presence(
        {
          leaveDelayMs: this.#limits.PRESENCE_LEAVE_DELAY_MS,
          maxMembers: this.#limits.PRESENCE_MAX_MEMBERS,
          countIntervalMs: this.#limits.PRESENCE_COUNT_INTERVAL_MS,
        },
        stream,
        {
          send: (cursor, text, bytes, tag) => this.delivery.sendPresence(cursor, text, bytes, tag),
          counted: (events) => (counters ?? this.#counters).presenceSent(events),
          ...presence,
        },
      ),
    );
    return stream;
  }

  /** The presence of a room on this object. */
  presence(stream: Stream): Presence {
    return this.#presences.get(stream) as Presence;
  }

  /** A room no socket here follows any more is forgotten, its presence with it. */
  closeStream(stream: Stream): void {
    if (stream.cursors.size > 0) return;
    this.#presences.delete(stream);
    this.delivery.dropStream(stream);
  }

  /**
   * Accepts a socket into `stream`: the welcome, a `lost` event when the
   * socket's history is not the room's (its epoch changed, or it claims a seq
   * from the future), the room's presence, then (for a resume) the messages
   * after `since` from the source, or (without `since`, for `?rewind=N`) the
   * last N messages the source holds.
   */
  async accept(stream: Stream, admission: Admission): Promise<Response> {
    const { socket, client } = this.#open(admission.attachment);
    const latest = stream.flushedSeq;
    const { since, rewind } = admission.resume;
    let rewindStart: number | null = null;
    if (since === null && rewind !== null && rewind > 0) {
      // A new socket that wants the last `rewind` messages: it starts behind, and catch-up brings
      // them as its acks allow. It starts no further back than the source still holds, so it is
      // told of no loss for messages it never had (a source that cannot say, a leaf's ring, reports
      // what the room's history no longer holds as `lost`, as for any socket behind).
      const oldest = stream.source.oldest?.(Date.now()) ?? null;
      rewindStart = Math.max(0, latest - rewind, oldest === null ? 0 : oldest - 1);
    }
    const welcome: WelcomeEvent = {
      type: "welcome",
      room: stream.room,
      // A rewinding socket is told where its messages start, so that each follows the one before.
      seq: rewindStart ?? latest,
      epoch: admission.epoch,
      window: this.#limits.WINDOW_BYTES,
      rate: this.#rate,
      maxMessageBytes: this.#limits.MAX_MESSAGE_BYTES,
    };
    // The welcome goes out with the first frame after it (the room's presence, a lost range, the
    // first messages of a resume), so that a new socket costs one send where it would cost two.
    socket.held = JSON.stringify(welcome);
    this.delivery.join(socket);
    this.#follow(socket, stream, admission.resume, admission.epoch, rewindStart);
    this.delivery.flushHeld(socket);
    await this.sweeper.ensureAlarm();
    return new Response(null, { status: 101, webSocket: client });
  }

  /** The welcome of a multiplexed connection of this service's protocol. */
  connectionWelcome(): string {
    const welcome: ConnectionWelcomeEvent = {
      type: "welcome",
      window: this.#limits.WINDOW_BYTES,
      rate: this.#rate,
      maxMessageBytes: this.#limits.MAX_MESSAGE_BYTES,
      maxRooms: this.#limits.MAX_ROOMS_PER_CONNECTION,
      subscribeRate: { perSecond: this.#limits.SUBSCRIBES_PER_SECOND, burst: Math.max(1, this.#limits.SUBSCRIBE_BURST) },
    };
    return JSON.stringify(welcome);
  }

  /** Accepts a connection that follows rooms as it subscribes to them: its `welcome` text, and no room yet. */
  async acceptConnection(attachment: SocketAttachment, welcome: string = this.connectionWelcome()): Promise<Response> {
    const { socket, client } = this.#open(attachment);
    socket.ws.send(welcome);
    this.delivery.join(socket);
    await this.sweeper.ensureAlarm();
    return new Response(null, { status: 101, webSocket: client });
  }

  /**
   * A multiplexed connection follows `stream`: `subscribed` says where the room
   * stands, `lost` when its history is not the room's, the room's presence
   * (where the socket is who `as` says, its own identity when absent), then
   * (for a resume) the messages after `since`. Null when the socket did not
   * survive the sends.
   */
  subscribe(socket: SocketState, stream: Stream, resume: ResumePoint, epoch: string, as?: FollowAs): Cursor | null {
    const subscribed: SubscribedEvent = { type: "subscribed", room: stream.room, seq: stream.flushedSeq, epoch };
    const text = stream.text(subscribed);
    if (text !== null && !this.delivery.sendAnswer(socket, text)) return null;
    return this.#follow(socket, stream, resume, epoch, null, as);
  }

  /** The connection stops following `cursor`'s room: `unsubscribed` (with why, when the server ended it), and it leaves the room's presence. */
  unsubscribe(cursor: Cursor, why?: { code: ErrorCode; reason: string }): void {
    const { socket, stream } = cursor;
    if (stream.cursors.get(socket.ws) !== cursor) return;
    this.delivery.unfollow(cursor);
    this.#presences.get(stream)?.leave(cursor, Date.now());
    const unsubscribed: UnsubscribedEvent = { type: "unsubscribed", room: stream.room, ...(why ? { code: why.code, reason: why.reason } : {}) };
    const text = stream.text(unsubscribed, cursor);
    if (text !== null) this.delivery.sendAnswer(socket, text);
  }

  /** A new socket, accepted with the Hibernation API, its attachment written. */
  #open(attachment: SocketAttachment): { socket: SocketState; client: WebSocket } {
    const pair = new WebSocketPair();
    const client = pair[0];
    const server = pair[1];
    this.#ctx.acceptWebSocket(server);
    server.serializeAttachment(attachment);
    return { socket: new SocketState(server, attachment), client };
  }

  /**
   * The socket follows `stream` from where it asks to resume, or from the
   * room's present; one from another history (or from the future) starts
   * level, told what it lost. Then the room's presence, then catch-up.
   */
  #follow(socket: SocketState, stream: Stream, resume: ResumePoint, epoch: string, rewindStart: number | null = null, as?: FollowAs): Cursor | null {
    const latest = stream.flushedSeq;
    let start = rewindStart ?? latest;
    if (resume.since !== null) {
      if ((resume.epoch !== null && resume.epoch !== epoch) || resume.since > latest) {
        const lost: LostEvent = { type: "lost", reason: "epoch", from: 1, to: latest };
        const text = stream.text(lost);
        if (text !== null && !this.delivery.sendControl(socket, text)) return null;
      } else {
        start = resume.since;
      }
    }
    const now = Date.now();
    const cursor = this.delivery.follow(socket, stream, start, now, as);
    // The presence picture first, then a resume's or a rewind's messages: presence has no seq,
    // and catch-up may take many windows, each waiting for an ack.
    this.presence(stream).join(cursor);
    if (cursor.behind && this.delivery.holds(socket)) this.delivery.catchUp(cursor, now);
    // A failed send forgets the socket (and it leaves the room's presence).
    return this.delivery.holds(socket) ? cursor : null;
  }

  /**
   * Sockets that were here when the object woke, as `place` says: the streams
   * each follows and the seq it is level at in each (null leaves it out). The
   * runtime also lists sockets still closing (a stalled peer never finishes
   * the close handshake); those are not here any more. Presence is rebuilt
   * from their identities without telling anyone.
   */
  restore(place: (attachment: SocketAttachment, ws: WebSocket) => readonly { stream: Stream; seq: number; as?: FollowAs }[] | null): SocketState[] {
    const restored: SocketState[] = [];
    const now = Date.now();
    for (const ws of this.#ctx.getWebSockets()) {
      const attachment = ws.deserializeAttachment() as SocketAttachment | null;
      if (!attachment || ws.readyState !== WebSocket.OPEN) continue;
      const places = place(attachment, ws);
      if (!places) continue;
      const socket = new SocketState(ws, attachment);
      this.delivery.join(socket);
      for (const at of places) {
        if (!this.delivery.holds(socket)) break;
        const cursor = this.delivery.follow(socket, at.stream, at.seq, now, at.as);
        this.presence(at.stream).restore(cursor);
        if (cursor.behind) this.delivery.catchUp(cursor, now);
      }
      restored.push(socket);
    }
    return restored;
  }

  /** The Hibernation API's `webSocketMessage`. */
  async message(ws: WebSocket, message: string | ArrayBuffer): Promise<void> {
    // A socket the object no longer tracks was closed (or forgotten) by it: frames the peer
    // sent before it saw the close were answered by the close, and must not be acted on.
    const socket = this.delivery.get(ws);
    if (!socket) return;
    if (this.#host.beforeFrame && !(await this.#host.beforeFrame(socket))) return;
    await this.frames.handle(socket, message);
  }

  /** The Hibernation API's `webSocketClose`. */
  closed(ws: WebSocket, code: number, reason: string): void {
    this.delivery.peerClosed(ws, code, reason);
  }

  /** The Hibernation API's `webSocketError`. */
  errored(ws: WebSocket, error: unknown): void {
    const socket = this.delivery.failed(ws, error);
    logEvent("socket_error", { room: this.#host.name(), socket: socket?.attachment.id ?? null, error: String(error) });
  }

  /** The object's alarm: the sweep, and the object's idle work. */
  async alarm(): Promise<void> {
    try {
      await this.sweeper.alarm();
    } catch (error) {
      logEvent("error", { room: this.#host.name(), where: "alarm", error: String(error) });
    }
  }

  /** Closes every socket with `code` so clients reconnect and resume; returns how many. */
  shutdown(code: number = CloseCode.SERVICE_RESTART, reason = "service restart"): number {
    let closed = 0;
    for (const ws of this.#ctx.getWebSockets()) {
      this.delivery.close(ws, code, reason);
      closed += 1;
    }
    return closed;
  }

  /** The cursor of `ws` in `stream`, when the socket is still here. */
  cursorOf(stream: Stream, ws: WebSocket): Cursor | undefined {
    return stream.cursors.get(ws);
  }

  #left(socket: SocketState, cause: LeaveCause): void {
    const now = Date.now();
    for (const cursor of socket.cursors.values()) this.#presences.get(cursor.stream)?.leave(cursor, now);
    this.#host.left?.(socket, cause);
  }
}
