import { DEFAULT_BACKOFF, backoffDelay, type BackoffOptions } from "./backoff.js";
import {
  PublishError,
  RoomErrorEvent,
  RoomLostEvent,
  RoomMessageEvent,
  RoomStateEvent,
  type ConnectionState,
  type RoomClientEventMap,
} from "./events.js";
import {
  CloseCode,
  PING,
  PING_INTERVAL_SECONDS,
  PONG,
  parseServerFrame,
  shouldReconnect,
  type ClientFrame,
  type ErrorEvent as WireError,
  type LostEvent as WireLost,
  type MessageEvent as WireMessage,
  type ServerEvent,
  type WelcomeEvent as WireWelcome,
} from "./protocol.js";
import { resumeUrl, roomSocketUrl, type RoomAddress } from "./url.js";

// A method's parameter is checked bivariantly, so both the DOM WebSocket and
// `ws` (whose handlers take their own event classes) fit these slots.
type Handler<E> = { bivarianceHack(event: E): void }["bivarianceHack"];

/** The parts of a WebSocket the client uses; the browser's and the `ws` package's both fit. */
export interface WebSocketLike {
  readonly readyState: number;
  onopen: Handler<unknown> | null;
  onmessage: Handler<{ data: unknown }> | null;
  onclose: Handler<{ code: number; reason: string }> | null;
  onerror: Handler<unknown> | null;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  /** `ws` only: drop the connection without a closing handshake. */
  terminate?(): void;
}

export type WebSocketConstructor = new (url: string) => WebSocketLike;

export interface RoomClientOptions extends RoomAddress {
  /** WebSocket implementation; defaults to the global one (pass `ws` on Node 20). */
  WebSocket?: WebSocketConstructor;
  /** Resume after this seq instead of starting at the room's current position. */
  since?: number;
  /** Epoch that `since` belongs to, so a lost history is detected. */
  epoch?: string;
  /** Delays between reconnect attempts (exponential, full jitter). */
  backoff?: Partial<BackoffOptions>;
  /** A connection that stayed open this long resets the backoff to its first step. Default 5000. */
  stableAfterMs?: number;
  /** Interval between heartbeat pings. Default 25 s (PING_INTERVAL_SECONDS). */
  pingIntervalMs?: number;
  /**
   * After a ping, how long to wait for any frame before declaring the
   * connection dead and reconnecting. A silent network is therefore detected
   * within pingIntervalMs + pongTimeoutMs. Default 10000.
   */
  pongTimeoutMs?: number;
  /** How long a connection attempt may take until the room welcomes it. Default 10000. */
  connectTimeoutMs?: number;
  /** Acknowledge at most this long after a frame arrives (and at once when half the window is unacknowledged). Default 100. */
  ackDelayMs?: number;
}

type Timer = ReturnType<typeof setTimeout>;

interface PendingPublish {
  resolve(seq: number): void;
  reject(error: PublishError): void;
}

const OPEN = 1;
const noop = (): void => {};
/** Until a welcome says otherwise: the room's default window. */
const DEFAULT_WINDOW_BYTES = 1024 * 1024;
// ws reports an upgrade refused over HTTP only through the error text.
const HTTP_AUTH_REFUSAL = /Unexpected server response: 40[13]\b/;

/**
 * A subscription to one room that survives disconnects: it reconnects with
 * backoff, resumes after the last message it delivered, acknowledges for flow
 * control and detects dead connections. The room sends each message once and
 * in order, so the client delivers what it receives and keeps its position.
 *
 * Events: `message` (RoomMessageEvent), `state` (RoomStateEvent), `lost`
 * (RoomLostEvent) and `error` (RoomErrorEvent).
 *
 * @example
 * const room = new RoomClient({ host: "example.com", room: "lobby" });
 * room.addEventListener("message", (e) => console.log(e.seq, e.data));
 */
export class RoomClient<T = unknown> extends EventTarget {
  /** The room's WebSocket URL, without the resume position. */
  readonly url: string;

  #WebSocket: WebSocketConstructor;
  #backoff: BackoffOptions;
  #stableAfterMs: number;
  #pingIntervalMs: number;
  #pongTimeoutMs: number;
  #connectTimeoutMs: number;
  #ackDelayMs: number;

  #state: ConnectionState = "connecting";
  #socket: WebSocketLike | null = null;
  #attempt = 0;
  #reconnectTimer: Timer | undefined;
  #authRefused = false;

  // Position: last seq delivered to the application, and the history it belongs to.
  #lastSeq: number | undefined;
  #epoch: string | undefined;

  // Per-connection state, reset by #detach.
  #openedAt = 0;
  /** The epoch of this connection's welcome, when it differs from the client's (until the `lost` event). */
  #welcomeEpoch: string | undefined;
  #window = DEFAULT_WINDOW_BYTES;
  /** The last message received and not yet acknowledged: what the next ack names. */
  #toAck: WireMessage | null = null;
  #unackedBytes = 0;
  #connectTimer: Timer | undefined;
  #pingTimer: ReturnType<typeof setInterval> | undefined;
  #pongTimer: Timer | undefined;
  #ackTimer: Timer | undefined;

  // Publishes wait here for the frame budget the welcome announced (acks need none: they are free).
  /** Publishes not yet sent; they survive reconnects because the server never saw them. */
  #queued: Array<{ frame: ClientFrame & { id: string }; publish: PendingPublish }> = [];
  #rate = { perSecond: 0, burst: 1 };
  #budget = 1;
  #refilledAt = 0;
  #pumpTimer: Timer | undefined;
  #nextPublishId = 0;
  /** Publishes sent and awaiting the server's answer, by id. */
  #pending = new Map<string, PendingPublish>();

  #onOnline = (): void => this.#networkChanged();

  /**
   * Opens the room right away.
   * @param address a room URL, or options naming the host and room.
   * @param options further options when `address` is a URL.
   */
  constructor(address: string | RoomClientOptions, options: RoomClientOptions = {}) {
    super();
    const opts: RoomClientOptions = typeof address === "string" ? { ...options, url: address } : address;
    this.url = roomSocketUrl(opts);
    const Impl = opts.WebSocket ?? (globalThis.WebSocket as WebSocketConstructor | undefined);
    if (!Impl) {
      throw new TypeError("no global WebSocket: pass one in the options, e.g. { WebSocket } from the ws package");
    }
    this.#WebSocket = Impl;
    this.#backoff = { ...DEFAULT_BACKOFF, ...opts.backoff };
    this.#stableAfterMs = opts.stableAfterMs ?? 5000;
    this.#pingIntervalMs = opts.pingIntervalMs ?? PING_INTERVAL_SECONDS * 1000;
    this.#pongTimeoutMs = opts.pongTimeoutMs ?? 10_000;
    this.#connectTimeoutMs = opts.connectTimeoutMs ?? 10_000;
    this.#ackDelayMs = opts.ackDelayMs ?? 100;
    this.#lastSeq = opts.since;
    this.#epoch = opts.epoch;
    globalThis.addEventListener?.("online", this.#onOnline);
    this.#connect();
  }

  /** Current connection state. */
  get state(): ConnectionState {
    return this.#state;
  }

  /** Seq of the last message delivered (or the room's position when none was yet). */
  get lastSeq(): number | undefined {
    return this.#lastSeq;
  }

  /** Identity of the room history `lastSeq` belongs to. */
  get epoch(): string | undefined {
    return this.#epoch;
  }

  override addEventListener<K extends keyof RoomClientEventMap<T>>(
    type: K,
    listener: ((event: RoomClientEventMap<T>[K]) => void) | { handleEvent(event: RoomClientEventMap<T>[K]): void } | null,
    options?: boolean | AddEventListenerOptions,
  ): void;
  override addEventListener(
    type: string,
    listener: EventListenerOrEventListenerObject | null,
    options?: boolean | AddEventListenerOptions,
  ): void;
  override addEventListener(
    type: string,
    listener: EventListenerOrEventListenerObject | null,
    options?: boolean | AddEventListenerOptions,
  ): void {
    super.addEventListener(type, listener, options);
  }

  override removeEventListener<K extends keyof RoomClientEventMap<T>>(
    type: K,
    listener: ((event: RoomClientEventMap<T>[K]) => void) | { handleEvent(event: RoomClientEventMap<T>[K]): void } | null,
    options?: boolean | EventListenerOptions,
  ): void;
  override removeEventListener(
    type: string,
    listener: EventListenerOrEventListenerObject | null,
    options?: boolean | EventListenerOptions,
  ): void;
  override removeEventListener(
    type: string,
    listener: EventListenerOrEventListenerObject | null,
    options?: boolean | EventListenerOptions,
  ): void {
    super.removeEventListener(type, listener, options);
  }

  /**
   * Publishes `data` into the room over the socket, waiting for a connection
   * if there is none. Resolves with the message's seq. Rejects with a
   * PublishError when the room refuses it, when the client closes, or with
   * code "unconfirmed" when the connection ended before the server answered
   * (the message may or may not have been published; it is not re-sent).
   */
  publish(data: T): Promise<number> {
    return new Promise((resolve, reject) => {
      if (this.#state === "closed") {
        reject(new PublishError("closed", "the client is closed"));
        return;
      }
      if (data === undefined) {
        reject(new PublishError("bad_request", "data must be a JSON value"));
        return;
      }
      this.#queued.push({ frame: { type: "publish", data, id: String(++this.#nextPublishId) }, publish: { resolve, reject } });
      this.#pump();
    });
  }

  /** Closes the connection for good; no reconnect follows. */
  close(code: number = CloseCode.NORMAL, reason = ""): void {
    if (this.#state === "closed") return;
    const socket = this.#socket;
    this.#detach();
    clearTimeout(this.#reconnectTimer);
    globalThis.removeEventListener?.("online", this.#onOnline);
    // Browsers only let applications send 1000 or 3000-4999.
    const sendable = code === CloseCode.NORMAL || (code >= 3000 && code <= 4999) ? code : CloseCode.NORMAL;
    try {
      socket?.close(sendable, reason);
    } catch {
      // Already closing; nothing left to do.
    }
    for (const { publish } of this.#queued.splice(0)) {
      publish.reject(new PublishError("closed", "the client was closed"));
    }
    this.#setState("closed", code, reason);
  }

  // -------------------------------------------------------------------------
  // Connection lifecycle
  // -------------------------------------------------------------------------

  #connect(): void {
    clearTimeout(this.#reconnectTimer);
    this.#reconnectTimer = undefined;
    this.#authRefused = false;
    let socket: WebSocketLike;
    try {
      socket = new this.#WebSocket(resumeUrl(this.url, this.#lastSeq, this.#epoch));
    } catch (error) {
      this.#emitError("transport", describe(error));
      this.#scheduleReconnect();
      return;
    }
    this.#socket = socket;
    // Every handler checks it still belongs to the current socket: an
    // abandoned socket may keep reporting after a new one took its place.
    socket.onopen = () => {
      if (socket === this.#socket) this.#startHeartbeat();
    };
    socket.onmessage = (event) => {
      if (socket === this.#socket) this.#onFrame(event.data);
    };
    socket.onerror = (event) => {
      if (socket !== this.#socket) return;
      const text = describe(event);
      if (HTTP_AUTH_REFUSAL.test(text)) this.#authRefused = true;
      this.#emitError("transport", text);
    };
    socket.onclose = (event) => {
      if (socket === this.#socket) this.#onSocketClosed(event.code, event.reason);
    };
    this.#connectTimer = setTimeout(() => this.#abandon("no welcome before the connect timeout"), this.#connectTimeoutMs);
  }

  #onSocketClosed(code: number, reason: string): void {
    this.#resetBackoffIfStable();
    this.#detach();
    if (this.#authRefused || !shouldReconnect(code)) {
      const finalCode = this.#authRefused ? CloseCode.UNAUTHORIZED : code;
      globalThis.removeEventListener?.("online", this.#onOnline);
      for (const { publish } of this.#queued.splice(0)) {
        publish.reject(new PublishError("closed", `the room closed the connection (${finalCode})`));
      }
      this.#setState("closed", finalCode, reason);
      return;
    }
    this.#scheduleReconnect(code, reason);
  }

  /** A connection that lasted is not part of a failure streak: the next retry starts the backoff over. */
  #resetBackoffIfStable(): void {
    if (this.#openedAt > 0 && Date.now() - this.#openedAt >= this.#stableAfterMs) this.#attempt = 0;
  }

  /** Gives up on the current socket without waiting for its close handshake, then reconnects. */
  #abandon(reason: string): void {
    const socket = this.#socket;
    if (!socket) return;
    this.#resetBackoffIfStable();
    this.#detach();
    try {
      if (socket.terminate) socket.terminate();
      else socket.close(CloseCode.NORMAL, reason);
    } catch {
      // The socket is already gone.
    }
    this.#scheduleReconnect(undefined, reason);
  }

  #scheduleReconnect(code?: number, reason?: string): void {
    this.#setState("reconnecting", code, reason);
    if (this.#state !== "reconnecting" || this.#reconnectTimer !== undefined) return;
    const delay = backoffDelay(this.#attempt++, this.#backoff);
    this.#reconnectTimer = setTimeout(() => this.#connect(), delay);
  }

  /** The browser says the network is back: retry now, or check the open connection is still alive. */
  #networkChanged(): void {
    if (this.#reconnectTimer !== undefined) {
      this.#attempt = 0;
      this.#connect();
    } else if (this.#state === "open") {
      this.#ping();
    }
  }

  /** Forgets the current socket and everything tied to it. */
  #detach(): void {
    const socket = this.#socket;
    if (!socket) return;
    this.#socket = null;
    // No-op handlers rather than null: `ws` throws on an error event nobody listens to.
    socket.onopen = socket.onmessage = socket.onclose = socket.onerror = noop;
    clearTimeout(this.#connectTimer);
    clearInterval(this.#pingTimer);
    clearTimeout(this.#pongTimer);
    clearTimeout(this.#ackTimer);
    clearTimeout(this.#pumpTimer);
    this.#pongTimer = this.#ackTimer = this.#pumpTimer = undefined;
    this.#openedAt = 0;
    this.#welcomeEpoch = undefined;
    this.#toAck = null;
    this.#unackedBytes = 0;
    for (const publish of this.#pending.values()) {
      publish.reject(new PublishError("unconfirmed", "the connection ended before the publish was confirmed"));
    }
    this.#pending.clear();
  }

  #setState(next: ConnectionState, code?: number, reason?: string): void {
    const previous = this.#state;
    if (previous === next) return;
    this.#state = next;
    this.dispatchEvent(new RoomStateEvent(next, previous, code, reason));
  }

  // -------------------------------------------------------------------------
  // Heartbeat
  // -------------------------------------------------------------------------

  #startHeartbeat(): void {
    this.#pingTimer = setInterval(() => this.#ping(), this.#pingIntervalMs);
  }

  #ping(): void {
    this.#send(PING);
    this.#pongTimer ??= setTimeout(() => this.#abandon("no answer to ping"), this.#pongTimeoutMs);
  }

  // -------------------------------------------------------------------------
  // Inbound frames
  // -------------------------------------------------------------------------

  #onFrame(data: unknown): void {
    // Any frame proves the connection alive, not only the pong.
    clearTimeout(this.#pongTimer);
    this.#pongTimer = undefined;
    if (typeof data !== "string") {
      this.#emitError("bad_frame", "binary frame ignored");
      return;
    }
    if (data === PONG) return;
    const parsed = parseServerFrame(data);
    if (!parsed.ok) {
      this.#emitError("bad_frame", parsed.error);
      return;
    }
    const socket = this.#socket;
    let last: WireMessage | null = null;
    for (const event of parsed.value) {
      if (event.type === "message") last = event;
      this.#onEvent(event);
      // A listener may have closed the client, or the socket was abandoned.
      if (this.#socket !== socket) return;
    }
    // Only message frames count against the window; control events are free.
    if (last) this.#received(last, utf8Length(data));
  }

  #onEvent(event: ServerEvent): void {
    switch (event.type) {
      case "welcome":
        return this.#onWelcome(event);
      case "message":
        return this.#onMessage(event);
      case "lost":
        return this.#onLost(event);
      case "published":
        this.#settlePublish(event.id, (p) => p.resolve(event.seq));
        return;
      case "error":
        return this.#onServerError(event);
    }
  }

  #onWelcome(welcome: WireWelcome): void {
    clearTimeout(this.#connectTimer);
    this.#openedAt = Date.now();
    this.#window = welcome.window > 0 ? welcome.window : Number.POSITIVE_INFINITY;
    if (this.#epoch !== undefined && this.#epoch !== welcome.epoch && this.#lastSeq !== undefined) {
      // The room's history changed: a `lost` event follows, and the position moves with it.
      // Until then the old epoch stays, so a reconnect in between is told again.
      this.#welcomeEpoch = welcome.epoch;
    } else {
      this.#epoch = welcome.epoch;
    }
    this.#lastSeq ??= welcome.seq;
    this.#rate = welcome.rate ?? this.#rate;
    this.#budget = Math.max(1, Math.floor(this.#rate.burst / 2));
    this.#refilledAt = Date.now();
    this.#setState("open");
    if (this.#state === "open") this.#pump();
  }

  #onMessage(message: WireMessage): void {
    const last = this.#lastSeq ?? message.seq - 1;
    if (message.seq <= last) return; // Already delivered (a hand-over from an older position).
    if (message.seq !== last + 1) {
      // The room never skips a message for a socket that acknowledges: this is a server fault.
      // Resuming from the last delivered seq gets the rest (or a `lost` naming it).
      this.#emitError("bad_frame", `expected seq ${last + 1}, got ${message.seq}`);
      this.#abandon("out-of-order message");
      return;
    }
    this.#lastSeq = message.seq;
    this.dispatchEvent(new RoomMessageEvent<T>(message.seq, message.data as T, message.ts));
  }

  #onLost(lost: WireLost): void {
    if (lost.reason === "epoch") {
      // Another history: seqs restarted, and the position moves to the room's present.
      if (this.#welcomeEpoch !== undefined) this.#epoch = this.#welcomeEpoch;
      this.#welcomeEpoch = undefined;
      this.#lastSeq = lost.to;
    } else {
      const last = this.#lastSeq ?? lost.from - 1;
      if (lost.to <= last) return;
      this.#lastSeq = lost.to;
    }
    this.dispatchEvent(new RoomLostEvent(lost.reason, lost.from, lost.to));
  }

  // -------------------------------------------------------------------------
  // Acknowledgements. An ack names the last message of a frame received, with
  // its tag: proof that it was read, which releases every frame up to it. One
  // is sent at most ackDelayMs after a frame, and at once when half the window
  // is unacknowledged, so the room never waits on this client for long.
  // -------------------------------------------------------------------------

  #received(last: WireMessage, bytes: number): void {
    this.#toAck = last;
    this.#unackedBytes += bytes;
    if (this.#unackedBytes * 2 >= this.#window) this.#ack();
    else this.#ackTimer ??= setTimeout(() => this.#ack(), this.#ackDelayMs);
  }

  #ack(): void {
    clearTimeout(this.#ackTimer);
    this.#ackTimer = undefined;
    const message = this.#toAck;
    if (!message) return;
    if (this.#send(JSON.stringify({ type: "ack", seq: message.seq, tag: message.tag } satisfies ClientFrame))) {
      this.#toAck = null;
      this.#unackedBytes = 0;
    }
  }

  // -------------------------------------------------------------------------
  // Publishes, within the frame budget the welcome announced
  // -------------------------------------------------------------------------

  /** Sends queued publishes as far as the budget allows; retries when it has refilled. */
  #pump(): void {
    clearTimeout(this.#pumpTimer);
    this.#pumpTimer = undefined;
    const socket = this.#socket;
    if (!socket || socket.readyState !== OPEN || this.#state !== "open") return;
    // Keep well inside the room's budget: a quarter of it is left for timing slack.
    const rate = this.#rate.perSecond > 0 ? this.#rate.perSecond * 0.75 : Number.POSITIVE_INFINITY;
    const burst = Math.max(1, Math.floor(this.#rate.burst / 2));
    while (this.#queued.length > 0) {
      const now = Date.now();
      this.#budget = Math.min(burst, this.#budget + ((now - this.#refilledAt) / 1000) * rate);
      this.#refilledAt = now;
      if (this.#budget < 1) {
        this.#pumpTimer = setTimeout(() => this.#pump(), Math.ceil(((1 - this.#budget) / rate) * 1000));
        return;
      }
      const { frame, publish } = this.#queued.shift()!;
      let text: string;
      try {
        text = JSON.stringify(frame);
      } catch (error) {
        publish.reject(new PublishError("bad_request", describe(error)));
        continue;
      }
      this.#budget -= 1;
      this.#pending.set(frame.id, publish);
      if (!this.#send(text)) {
        this.#pending.delete(frame.id);
        this.#queued.unshift({ frame, publish });
        return;
      }
    }
  }

  #settlePublish(id: string | undefined, settle: (publish: PendingPublish) => void): boolean {
    const publish = id === undefined ? undefined : this.#pending.get(id);
    if (!publish) return false;
    this.#pending.delete(id!);
    settle(publish);
    return true;
  }

  #onServerError(error: WireError): void {
    const settled = this.#settlePublish(error.id, (p) => p.reject(new PublishError(error.code, error.message)));
    if (!settled) this.#emitError(error.code, error.message);
  }

  #emitError(code: RoomErrorEvent["code"], message: string): void {
    this.dispatchEvent(new RoomErrorEvent(code, message));
  }

  #send(text: string): boolean {
    const socket = this.#socket;
    if (!socket || socket.readyState !== OPEN) return false;
    try {
      socket.send(text);
      return true;
    } catch {
      return false;
    }
  }
}

function describe(value: unknown): string {
  if (value instanceof Error) return value.message;
  if (typeof value === "object" && value !== null) {
    const { message, error } = value as { message?: unknown; error?: unknown };
    if (typeof message === "string" && message) return message;
    if (error instanceof Error) return error.message;
  }
  return "WebSocket error";
}

/** UTF-8 length of a string, which is what the server counts against the window. */
function utf8Length(text: string): number {
  let bytes = text.length;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    // 2 bytes below U+0800; 3 for the rest of the BMP; a surrogate pair is 4 (2 per half).
    if (code >= 0x80) bytes += code < 0x800 || (code >= 0xd800 && code <= 0xdfff) ? 1 : 2;
  }
  return bytes;
}
