import {
  CloseCode,
  PING,
  PONG,
  parseClientFrame,
  parseMultiplexFrame,
  type AuthFrame,
  type CustomClientFrame,
  type PublishedEvent,
  type SubscribeFrame,
  type UnsubscribeFrame,
  type ServerError,
} from "../../protocol";
import { bodyHash } from "../../common/body-hash";
import { logEvent } from "../../common/log";
import { utf8Length } from "../../common/utf8";
import type { RoomCounters } from "./counters";
import type { Cursor } from "./cursor";
import type { Delivery } from "./delivery";
import type { FrameHooks } from "./frame-hooks";
import type { PublishOutcome, RetryKey } from "./publish-outcome";
import type { RatePolicy, SocketState } from "./socket-state";

/** What client frames need of the object they arrive at. */
export interface FrameHost {
  /**
   * Publishes a socket's message into the room of `cursor`: the room's own
   * publish path, or, for a socket on a leaf of a sharded room, the root's
   * (whose beforePublish may refuse). `retry` is the frame's idempotency key.
   */
  publishFrom(cursor: Cursor, dataJson: string, retry?: RetryKey): Promise<PublishOutcome>;
  /**
   * The answer to a publish whose key was already published (a duplicate, or a
   * conflict), else null: asked before the hooks run, so that a retry does not
   * pass them again. An object that forwards publishes (a leaf) leaves it out:
   * the room asks itself.
   */
  retried?(retry: RetryKey): PublishOutcome | null;
  /** The application's hooks for publishes and custom frames. */
  readonly hooks: FrameHooks;
  /** Rewrites a socket's attachment (its last-activity time) so it survives hibernation. */
  persistAttachment(socket: SocketState): void;
  /** For logs. */
  name(): string | null;
  /** Present on an object whose sockets are multiplexed connections: what their own frames do. */
  readonly multiplexed?: MultiplexFrames;
  /**
   * Present on an object whose sockets speak another protocol (the Pusher front door): every
   * text frame goes to it once the checks every frame passes are done (activity, token expiry,
   * binary frames, size).
   */
  readonly foreign?: ForeignFrames;
}

/** The frames of sockets that speak another protocol than this service's. */
export interface ForeignFrames {
  frame(socket: SocketState, text: string, now: number): Promise<void>;
}

/** What a multiplexed connection's frames of its own ask of the object that holds it. */
export interface MultiplexFrames {
  /** Follow a room (answered `subscribed` or `error`); has a budget of its own, not the frame budget. */
  subscribe(socket: SocketState, frame: SubscribeFrame): Promise<void>;
  /** Stop following a room (answered `unsubscribed`). */
  unsubscribe(socket: SocketState, frame: UnsubscribeFrame): void;
  /** A fresh token (answered `authorized`, or the socket is closed with 4001). */
  authorize(socket: SocketState, frame: AuthFrame): Promise<void>;
  /** Whether the socket may publish into `room` (its token's grant for it). */
  mayPublish(socket: SocketState, room: string): boolean;
}

export interface FrameLimits {
  /** MAX_FRAME_BYTES: larger frames close the socket with 1009. */
  maxFrameBytes: number;
  /** MAX_MESSAGE_BYTES: larger publishes are refused with `too_large`, and the socket stays. */
  maxMessageBytes: number;
  rate: RatePolicy;
}

/**
 * What an object that holds sockets does with each frame a client sends. The
 * rules, which docs/protocol.md states for clients:
 *
 * - Flow control is free: heartbeats (answered by the runtime) and acks that
 *   release a frame never count against the rate. Every other frame (a
 *   publish, an ack that releases nothing) takes a token from the socket's
 *   bucket of CLIENT_FRAMES_PER_SECOND (burst CLIENT_FRAME_BURST); past it the
 *   socket is closed with 4009. A client can send at most one releasing ack
 *   per frame it was sent, so free acks cost the room no more than the
 *   frames it chose to send.
 * - An ack that names a message the socket was never sent, or the last
 *   message of an unacknowledged frame with a wrong tag, is a lie: 4000. One
 *   that names a message inside a frame is stale, whatever its tag.
 * - A publish whose data is over MAX_MESSAGE_BYTES as JSON is refused with an
 *   `error` event `too_large` and the socket stays: MAX_FRAME_BYTES leaves
 *   room for the largest message in any honest encoding plus its envelope, so
 *   only a frame far beyond it closes the socket (1009).
 * - Anything that is not protocol is 4000. A custom frame (`{"type":"x-..."}`)
 *   is protocol only for a room whose onClientFrame hook handles it; it costs
 *   a token, like a publish.
 * - With beforePublish or onClientFrame overridden, a socket's publishes and
 *   custom frames pass the hooks one at a time, in arrival order.
 */
export class ClientFrames {
  readonly #delivery: Delivery;
  readonly #counters: RoomCounters;
  readonly #limits: FrameLimits;
  readonly #host: FrameHost;

  constructor(delivery: Delivery, counters: RoomCounters, limits: FrameLimits, host: FrameHost) {
    this.#delivery = delivery;
    this.#counters = counters;
    this.#limits = limits;
    this.#host = host;
  }

  /** Handles one frame from a socket the object tracks. Never throws: a failure closes that socket with 1011. */
  async handle(socket: SocketState, message: string | ArrayBuffer): Promise<void> {
    const ws = socket.ws;
    try {
      const now = Date.now();
      if (socket.touch(now)) {
        socket.attachment.activeAt = now;
        this.#host.persistAttachment(socket);
      }
      if (socket.attachment.expiresAt !== null && now >= socket.attachment.expiresAt) {
        this.#counters.refused("token_expired");
        this.#delivery.close(ws, CloseCode.UNAUTHORIZED, "token expired");
        return;
      }
      if (typeof message !== "string") return this.#refuse(ws, "bad_frame", CloseCode.BAD_FRAME, "binary frames are not supported");
      const maxFrame = this.#limits.maxFrameBytes;
      if (message.length * 3 > maxFrame && utf8Length(message) > maxFrame) {
        return this.#refuse(ws, "too_big", CloseCode.MESSAGE_TOO_BIG, `frame over ${maxFrame} bytes`);
      }
      // The runtime answers heartbeats itself; one can only get here while the answer is being set up.
      if (message === PING) {
        this.#delivery.sendControl(socket, PONG);
        return;
      }
      if (this.#host.foreign) return await this.#host.foreign.frame(socket, message, now);
      if (this.#host.multiplexed) return await this.#multiplexed(socket, message, now, this.#host.multiplexed);
      const parsed = parseClientFrame(message);
      if (!parsed.ok) return this.#refuse(ws, "bad_frame", CloseCode.BAD_FRAME, parsed.error);
      const frame = parsed.value;
      const cursor = socket.cursor;
      if (frame.type === "ack") return this.#ack(cursor, frame.seq, frame.tag, now);
      const hooks = this.#host.hooks;
      if (frame.type !== "publish") {
        if (!hooks.handlesClientFrames) {
          return this.#refuse(ws, "bad_frame", CloseCode.BAD_FRAME, `unknown frame type ${JSON.stringify(frame.type)}`);
        }
        if (!this.#spend(socket, now)) return;
        return await this.#inOrder(socket, frame.id, () => this.#custom(socket, frame));
      }
      if (!this.#spend(socket, now)) return;
      if (!socket.attachment.canPublish) {
        this.#error(socket, { type: "error", code: "forbidden", message: "this socket may not publish", id: frame.id });
        return;
      }
      await this.#publishChecked(cursor, frame.data, frame.id, frame.key);
    } catch (error) {
      logEvent("error", { room: this.#host.name(), socket: socket.attachment.id, where: "message", error: String(error) });
      this.#delivery.close(ws, CloseCode.INTERNAL_ERROR, "internal error");
    }
  }

  /** A multiplexed connection's frame: every room frame names its room. */
  async #multiplexed(socket: SocketState, message: string, now: number, rooms: MultiplexFrames): Promise<void> {
    const parsed = parseMultiplexFrame(message);
    if (!parsed.ok) return this.#refuse(socket.ws, "bad_frame", CloseCode.BAD_FRAME, parsed.error);
    const frame = parsed.value;
    switch (frame.type) {
      case "subscribe":
        return rooms.subscribe(socket, frame);
      case "unsubscribe":
        if (!this.#spend(socket, now)) return;
        return rooms.unsubscribe(socket, frame);
      case "auth":
        if (!this.#spend(socket, now)) return;
        return rooms.authorize(socket, frame);
      case "ack": {
        const cursor = socket.cursors.get(frame.room);
        // A room unsubscribed a moment ago: its frames are released by a later ack of another room.
        if (!cursor) {
          this.#spend(socket, now);
          return;
        }
        return this.#ack(cursor, frame.seq, frame.tag, now);
      }
      case "publish": {
        if (!this.#spend(socket, now)) return;
        const cursor = socket.cursors.get(frame.room);
        if (!cursor) {
          this.#error(socket, { type: "error", room: frame.room, code: "not_subscribed", message: "subscribe to a room before publishing into it", id: frame.id });
          return;
        }
        if (!rooms.mayPublish(socket, frame.room)) {
          this.#error(socket, { type: "error", room: frame.room, code: "forbidden", message: "this connection may not publish into this room", id: frame.id });
          return;
        }
        return this.#publishChecked(cursor, frame.data, frame.id, frame.key);
      }
    }
  }

  #ack(cursor: Cursor, seq: number, tag: number, now: number): void {
    const verdict = this.#delivery.ack(cursor, seq, tag, now);
    if (verdict === "forged") return this.#refuse(cursor.socket.ws, "bad_ack", CloseCode.BAD_FRAME, "ack for a message this socket was not sent, or with the wrong tag");
    if (verdict === "stale") this.#spend(cursor.socket, now);
  }

  /** A publish within the frame budget and the socket's rights: sized, then passed through the hooks in order when they watch. */
  async #publishChecked(cursor: Cursor, data: unknown, id: string | undefined, key: string | undefined): Promise<void> {
    const socket = cursor.socket;
    const dataJson = JSON.stringify(data);
    const bytes = utf8Length(dataJson);
    if (bytes > this.#limits.maxMessageBytes) {
      this.#counters.refused("too_large");
      this.#answerIn(cursor, { type: "error", code: "too_large", message: `the message is ${bytes} bytes as JSON, over the limit of ${this.#limits.maxMessageBytes}`, id });
      return;
    }
    if (this.#host.hooks.ordersFrames) return await this.#inOrder(socket, id, () => this.#publish(cursor, data, dataJson, id, key));
    await this.#publish(cursor, data, dataJson, id, key);
  }

  async #publish(cursor: Cursor, data: unknown, dataJson: string, id: string | undefined, key: string | undefined): Promise<void> {
    const socket = cursor.socket;
    const stream = cursor.stream;
    let json = dataJson;
    const hooks = this.#host.hooks;
    // The key and the data as the socket sent them: a retry is recognised before any hook transforms it.
    const retry: RetryKey | undefined = key === undefined ? undefined : { key, bodyHash: bodyHash(dataJson) };
    if (retry && hooks.checksPublishes) {
      const prior = this.#host.retried?.(retry) ?? null;
      if (prior) return this.#published(cursor, id, prior);
    }
    if (hooks.checksPublishes) {
      const checked = await hooks.checkPublish(dataJson, data, { kind: "socket", socket });
      if (!checked.ok) {
        this.#answerIn(cursor, { type: "error", code: checked.refusal.error, message: checked.refusal.message, id });
        return;
      }
      json = checked.dataJson;
    }
    let outcome: PublishOutcome;
    try {
      outcome = await this.#host.publishFrom(cursor, json, retry);
    } catch {
      this.#answerIn(cursor, { type: "error", code: "internal", message: "the message could not be stored", id });
      return;
    }
    this.#published(cursor, id, outcome);
  }

  /** Answers a publish frame: `published` (with `duplicate` for a key seen before), or the refusal as an `error`. */
  #published(cursor: Cursor, id: string | undefined, outcome: PublishOutcome): void {
    const socket = cursor.socket;
    // Refused by the room's beforePublish (the root's, for a socket on a leaf), or a key's conflict.
    if ("refused" in outcome) {
      this.#answerIn(cursor, { type: "error", code: outcome.refused.error, message: outcome.refused.message, id });
      return;
    }
    const published: PublishedEvent = { type: "published", id, seq: outcome.seq };
    if (outcome.duplicate) published.duplicate = true;
    this.#answerIn(cursor, published);
  }

  async #custom(socket: SocketState, frame: CustomClientFrame): Promise<void> {
    if (await this.#host.hooks.clientFrame(socket, frame)) return;
    this.#answer(socket, { type: "error", code: "internal", message: `the room could not handle ${frame.type}`, id: frame.id });
  }

  /** Runs `task` in the socket's hook queue; a socket with too many frames waiting is told so instead. */
  async #inOrder(socket: SocketState, id: string | undefined, task: () => Promise<void>): Promise<void> {
    const queued = this.#host.hooks.inOrder(socket, task);
    if (queued) return queued;
    this.#counters.refused("rate_limited");
    this.#error(socket, { type: "error", code: "rate_limited", message: "too many frames are waiting for the room; slow down", id });
  }

  /** Answers a frame about `cursor`'s room, in the room's shape: only a socket still here is told. */
  #answerIn(cursor: Cursor, event: PublishedEvent | ServerError): void {
    const text = cursor.stream.text(event, cursor);
    if (text !== null && this.#delivery.get(cursor.socket.ws) === cursor.socket) this.#delivery.sendControl(cursor.socket, text);
  }

  /** Answers a frame whose handling waited: only a socket still here is told. */
  #answer(socket: SocketState, event: PublishedEvent | ServerError | (ServerError & { room: string }) | (PublishedEvent & { room: string })): void {
    if (this.#delivery.get(socket.ws) === socket) this.#delivery.sendControl(socket, JSON.stringify(event));
  }

  /** Takes a frame token; false (and the socket closed with 4009) when the socket is over its rate. */
  spend(socket: SocketState, now: number): boolean {
    return this.#spend(socket, now);
  }

  #spend(socket: SocketState, now: number): boolean {
    const rate = this.#limits.rate;
    if (socket.takeFrameToken(now, rate)) return true;
    logEvent("kick", { room: this.#host.name(), socket: socket.attachment.id, reason: "rate_limited" });
    this.#counters.refused("rate_limited");
    this.#delivery.close(socket.ws, CloseCode.RATE_LIMITED, `over ${rate.perSecond} frames per second`);
    return false;
  }

  #refuse(ws: WebSocket, reason: string, code: number, message: string): void {
    this.#counters.refused(reason);
    this.#delivery.close(ws, code, message);
  }

  #error(socket: SocketState, event: ServerError | (ServerError & { room: string })): void {
    this.#delivery.sendControl(socket, JSON.stringify(event));
  }
}
