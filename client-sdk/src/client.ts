import { DEFAULT_ACK_DELAY_MS, type Ackable } from "./acks.js";
import { DEFAULT_BACKOFF, type BackoffOptions } from "./backoff.js";
import { Connection } from "./connection.js";
import {
  PublishError,
  RoomCustomEvent,
  RoomErrorEvent,
  RoomLostEvent,
  RoomMessageEvent,
  RoomPresenceEvent,
  RoomStateEvent,
  type ConnectionState,
  type RoomClientEventMap,
  type StateCause,
} from "./events.js";
import { Outbox } from "./outbox.js";
import {
  CloseCode,
  isCustomType,
  PING_INTERVAL_SECONDS,
  parseServerFrame,
  type CustomClientFrame,
  type ServerMessage as WireMessage,
  type ServerEvent,
} from "../../protocol/index.js";
import { PresenceView, type RoomPresence } from "./presence.js";
import { OrderedStream } from "./stream.js";
import type { WebSocketConstructor } from "./transport.js";
import { RoomEventTarget } from "./typed-target.js";
import { roomSocketUrl, type RoomAddress } from "./url.js";

/**
 * Where a `RoomClient` connects, and how it keeps the connection: where it
 * resumes, its backoff, heartbeat, timeouts and ack pace.
 *
 * @example
 * ```ts
 * const options: RoomClientOptions = {
 *   host: "fanout.example.com",
 *   room: "lobby",
 *   token: getToken,
 *   since: 41, // resume after the last message this page stored
 *   epoch: "k3v9x2",
 *   backoff: { maxDelayMs: 10_000 },
 * };
 * const room = new RoomClient(options);
 * ```
 *
 * @see client-sdk/README.md#options
 */
export interface RoomClientOptions extends RoomAddress {
  /** WebSocket implementation; the global one when absent (pass `ws` on Node 20). */
  WebSocket?: WebSocketConstructor;
  /** Resume after this seq instead of starting at the room's current position. */
  since?: number;
  /** Epoch that `since` belongs to, so a lost history is detected. */
  epoch?: string;
  /**
   * Delays between reconnect attempts (exponential, full jitter); fields left out keep their defaults.
   * @default { initialDelayMs: 1000, maxDelayMs: 30_000, factor: 2 }
   */
  backoff?: Partial<BackoffOptions>;
  /**
   * A connection that stayed open this long resets the backoff to its first step, milliseconds.
   * @default 5000
   */
  stableAfterMs?: number;
  /**
   * Interval between heartbeat pings, milliseconds (PING_INTERVAL_SECONDS).
   * @default 25_000
   */
  pingIntervalMs?: number;
  /**
   * After a ping, how long to wait for any frame before declaring the
   * connection dead and reconnecting, milliseconds. A silent network is
   * therefore detected within pingIntervalMs + pongTimeoutMs.
   * @default 10_000
   */
  pongTimeoutMs?: number;
  /**
   * How long a connection attempt may take until the room welcomes it, a token function's wait included, milliseconds.
   * @default 10_000
   */
  connectTimeoutMs?: number;
  /**
   * Longest wait before acknowledging a frame, milliseconds. Half the room's
   * window unacknowledged acks at once; otherwise one ack covers every frame
   * of this span. Acks are billed as incoming messages, so fewer is cheaper.
   * @default 1000
   */
  ackDelayMs?: number;
}

export { DEFAULT_ACK_DELAY_MS } from "./acks.js";

/**
 * A subscription to one room that survives disconnects: it reconnects with
 * backoff, resumes after the last message it delivered, acknowledges for flow
 * control and detects dead connections. The room sends each message once and
 * in order, so the client delivers what it receives and keeps its position.
 *
 * Events: `message` (RoomMessageEvent), `presence` (RoomPresenceEvent),
 * `state` (RoomStateEvent), `lost` (RoomLostEvent), `error`
 * (RoomErrorEvent) and `custom` (RoomCustomEvent: the room's own `x-` events).
 *
 * @typeParam T the type of message data.
 * @typeParam I the type of member data (a token's `info`).
 *
 * @example
 * ```ts
 * import { RoomClient } from "@edge-fanout/client";
 *
 * const room = new RoomClient<{ text: string }>({ host: "example.com", room: "lobby", token: getToken });
 * room.addEventListener("message", (e) => console.log(e.seq, e.data.text));
 * room.addEventListener("presence", () => render([...(room.presence.members?.values() ?? [])]));
 * const seq = await room.publish({ text: "hello" });
 * ```
 *
 * @see client-sdk/README.md
 */
export class RoomClient<T = unknown, I = unknown> extends RoomEventTarget<RoomClientEventMap<T, I>> {
  /** The room's WebSocket URL, without the resume position and without the token. */
  readonly url: string;

  #connection: Connection;
  #stream: OrderedStream;
  #outbox: Outbox;
  readonly #presence = new PresenceView<I>();

  /**
   * Opens the room right away.
   * @param address a room URL, or options naming the host and room.
   * @param [options={}] further options when `address` is a URL.
   * @throws {TypeError} for an unusable address, no WebSocket, or a fixed token that cannot travel where `tokenIn` says.
   */
  constructor(address: string | RoomClientOptions, options: RoomClientOptions = {}) {
    super();
    const opts: RoomClientOptions = typeof address === "string" ? { ...options, url: address } : address;
    this.url = roomSocketUrl(opts);
    const Impl = opts.WebSocket ?? (globalThis.WebSocket as WebSocketConstructor | undefined);
    if (!Impl) {
      throw new TypeError("no global WebSocket: pass one in the options, e.g. { WebSocket } from the ws package");
    }
    this.#stream = new OrderedStream(
      { since: opts.since, epoch: opts.epoch },
      opts.ackDelayMs ?? DEFAULT_ACK_DELAY_MS,
      (text) => this.#connection.send(text),
    );
    this.#connection = new Connection(
      {
        WebSocket: Impl,
        backoff: { ...DEFAULT_BACKOFF, ...opts.backoff },
        stableAfterMs: opts.stableAfterMs ?? 5000,
        pingIntervalMs: opts.pingIntervalMs ?? PING_INTERVAL_SECONDS * 1000,
        pongTimeoutMs: opts.pongTimeoutMs ?? 10_000,
        connectTimeoutMs: opts.connectTimeoutMs ?? 10_000,
        token: opts.token,
        tokenIn: opts.tokenIn ?? "subprotocol",
      },
      {
        url: () => this.#stream.resumeUrl(this.url),
        frame: (text) => this.#onFrame(text),
        error: (code, message) => this.#emitError(code, message),
        state: (next, previous, cause, code, reason) => this.#onState(next, previous, cause, code, reason),
        ended: () => {
          this.#stream.reset();
          this.#outbox.connectionEnded();
        },
      },
    );
    this.#outbox = new Outbox(this.#connection);
    this.#connection.start();
  }

  /** Current connection state. */
  get state(): ConnectionState {
    return this.#connection.state;
  }

  /** Seq of the last message delivered (or the room's position when none was yet). */
  get lastSeq(): number | undefined {
    return this.#stream.lastSeq;
  }

  /** Identity of the room history `lastSeq` belongs to. */
  get epoch(): string | undefined {
    return this.#stream.epoch;
  }

  /**
   * Who is in the room, as last heard: its member count, and its members by
   * id (null above the room's member cap, where the room sends only counts).
   * Replaced by a fresh picture on every connection.
   */
  get presence(): RoomPresence<I> {
    return this.#presence;
  }

  /**
   * Publishes `data` into the room over the socket, waiting for a connection
   * if there is none. Resolves with the message's seq. Rejects with a
   * PublishError when the room refuses it, when the client closes, with
   * "too_large" before sending anything when its JSON is over the room's
   * `maxMessageBytes` (announced in the welcome), or with "unconfirmed" when
   * the connection ended before the server answered (the message may or may
   * not have been published; it is not re-sent).
   *
   * @param data the message's data, a JSON value.
   * @returns the message's seq.
   *
   * @example
   * ```ts
   * try {
   *   const seq = await room.publish({ text: "hello" });
   * } catch (error) {
   *   if (error instanceof PublishError && error.code === "unconfirmed") askUserToRetry();
   * }
   * ```
   *
   * @see client-sdk/README.md#events
   */
  publish(data: T): Promise<number> {
    if (this.state === "closed") return Promise.reject(new PublishError("closed", "the client is closed"));
    if (data === undefined) return Promise.reject(new PublishError("bad_request", "data must be a JSON value"));
    return this.#outbox.publish(data);
  }

  /**
   * Sends a frame of the application's own, `{ type: "x-...", ... }`, to the
   * room's onClientFrame hook (a room without one closes the socket with
   * 4000). It waits for a connection and the room's frame budget like a
   * publish, in order with publishes, and resolves once it was sent; it is
   * not answered (the room may send `custom` events back) and not re-sent.
   *
   * @param frame the frame, `{ type: "x-...", ... }`.
   * @returns resolves once the frame was sent; rejects with a PublishError when it cannot be.
   * @see client-sdk/README.md#frames-of-your-own
   */
  send(frame: CustomClientFrame): Promise<void> {
    if (this.state === "closed") return Promise.reject(new PublishError("closed", "the client is closed"));
    if (!isCustomType(frame.type)) return Promise.reject(new PublishError("bad_request", 'an application frame\'s type starts with "x-"'));
    return this.#outbox.sendCustom(frame);
  }

  /**
   * Closes the connection for good; no reconnect follows.
   *
   * @param [code=1000] the close code.
   * @param [reason=""] the close reason.
   */
  close(code: number = CloseCode.NORMAL, reason = ""): void {
    if (this.state === "closed") return;
    this.#connection.close(code, reason);
  }

  // -------------------------------------------------------------------------

  #onState(next: ConnectionState, previous: ConnectionState, cause: StateCause, code?: number, reason?: string): void {
    if (next === "closed") {
      this.#outbox.close(cause === "client_closed" ? "the client was closed" : `the room closed the connection (${code})`);
    }
    this.dispatchEvent(new RoomStateEvent(next, previous, cause, code, reason));
    // A state listener may have closed the client already.
    if (next === "open" && this.state === "open") this.#outbox.pump();
  }

  #onFrame(text: string): void {
    const parsed = parseServerFrame(text);
    if (!parsed.ok) {
      this.#emitError("bad_frame", parsed.error);
      return;
    }
    const generation = this.#connection.generation;
    let last: Ackable | null = null;
    for (const event of parsed.value) {
      // Messages and presence count against the window; control events are free. A presence
      // event is acknowledged with its tag and the seq read when it arrived.
      if (event.type === "message") last = event;
      else if (event.type === "presence") last = { seq: this.#stream.lastSeq ?? 0, tag: event.tag };
      this.#onEvent(event);
      // A listener may have closed the client, or the socket was abandoned.
      if (this.#connection.generation !== generation) return;
    }
    if (last) this.#stream.received(last, text);
  }

  #onEvent(event: ServerEvent): void {
    switch (event.type) {
      case "welcome":
        this.#stream.welcome(event);
        this.#outbox.welcome(event);
        this.#connection.established();
        return;
      case "message":
        return this.#onMessage(event);
      case "lost":
        if (this.#stream.lost(event)) this.dispatchEvent(new RoomLostEvent(event.reason, event.from, event.to));
        return;
      case "presence": {
        const change = this.#presence.apply(event);
        this.dispatchEvent(new RoomPresenceEvent<I>(change.action, change.member, this.#presence));
        return;
      }
      case "published":
        this.#outbox.settle(event);
        return;
      case "error":
        if (!this.#outbox.settle(event)) this.#emitError(event.code, event.message);
        return;
      default:
        // The room's own events; anything else is from a newer protocol and ignored.
        if (isCustomType(event.type)) this.dispatchEvent(new RoomCustomEvent(event));
    }
  }

  #onMessage(message: WireMessage): void {
    const expected = this.#stream.expected;
    switch (this.#stream.admit(message)) {
      case "deliver":
        this.dispatchEvent(new RoomMessageEvent<T>(message.seq, message.data as T, message.ts));
        return;
      case "duplicate":
        return;
      case "gap":
        this.#emitError("bad_frame", `expected seq ${expected}, got ${message.seq}`);
        this.#connection.abandon("out_of_order");
        return;
    }
  }

  #emitError(code: RoomErrorEvent["code"], message: string): void {
    this.dispatchEvent(new RoomErrorEvent(code, message));
  }
}
