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
  DEFAULTS,
  PING,
  PONG,
  parseServerFrame,
  shouldReconnect,
  type ClientFrame,
  type ErrorEvent as WireError,
  type LostEvent as WireLost,
  type MessageEvent as WireMessage,
  type ReplayedEvent as WireReplayed,
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
  /** Interval between heartbeat pings. Default DEFAULTS.PING_INTERVAL_SECONDS. */
  pingIntervalMs?: number;
  /**
   * After a ping, how long to wait for any frame before declaring the
   * connection dead and reconnecting. A silent network is therefore detected
   * within pingIntervalMs + pongTimeoutMs. Default 10000.
   */
  pongTimeoutMs?: number;
  /** How long a connection attempt may take until the room welcomes it. Default 10000. */
  connectTimeoutMs?: number;
  /** Acknowledge after this many received messages. Default 64. */
  ackEveryMessages?: number;
  /** Acknowledge at most this long after a message arrives. Default 250. */
  ackDelayMs?: number;
  /** How long a gap may go without progress before the client resumes over a new connection. Default 5000. */
  replayTimeoutMs?: number;
}

type Timer = ReturnType<typeof setTimeout>;

interface PendingPublish {
  resolve(seq: number): void;
  reject(error: PublishError): void;
}

const OPEN = 1;
const noop = (): void => {};
// The room closes a socket that sends frames faster than its budget (pings
// excepted; the welcome announces it); keep well inside it, and keep acks to a
// share of it so publishes and replay requests still get through.
interface FramePacing {
  rate: number;
  burst: number;
  ackMinIntervalMs: number;
}
function pacingFor(budget: { perSecond: number; burst: number }): FramePacing {
  const perSecond = budget.perSecond > 0 ? budget.perSecond : Number.POSITIVE_INFINITY;
  return {
    rate: perSecond * 0.75,
    burst: Math.max(1, Math.floor(budget.burst / 2)),
    ackMinIntervalMs: 2000 / perSecond,
  };
}
// After signs that the server may be dropping frames for this socket, a lull
// this long in incoming messages triggers a probe for a dropped tail, for as
// long as the signs are recent.
const TAIL_PROBE_QUIET_MS = 300;
const DROP_RISK_MS = 10_000;
// ws reports an upgrade refused over HTTP only through the error text.
const HTTP_AUTH_REFUSAL = /Unexpected server response: 40[13]\b/;

/**
 * A subscription to one room that survives disconnects: it reconnects with
 * backoff, resumes after the last message it delivered, fills gaps, drops
 * duplicates, acknowledges for flow control and detects dead connections.
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
  #ackEveryMessages: number;
  #ackDelayMs: number;
  #replayTimeoutMs: number;

  #state: ConnectionState = "connecting";
  #socket: WebSocketLike | null = null;
  #attempt = 0;
  #reconnectTimer: Timer | undefined;
  #authRefused = false;

  // Position: last seq delivered to the application, and the history it belongs to.
  #lastSeq: number | undefined;
  #epoch: string | undefined;

  // Per-connection state, reset by #detach.
  #welcomeSeq = 0;
  /** Highest seq the room said it dropped for this client (a `dropped` event). */
  #droppedSeq = 0;
  #pacing = pacingFor({ perSecond: DEFAULTS.CLIENT_FRAMES_PER_SECOND, burst: DEFAULTS.CLIENT_FRAME_BURST });
  #openedAt = 0;
  #epochReported = false;
  #window: number = DEFAULTS.WINDOW_BYTES;
  #ackedSeq: number | undefined;
  /** Running estimate of a message's size on the wire, to size replay requests. */
  #messageBytes = 256;
  /** Highest seq received on this socket, delivered or held behind a gap. */
  #receivedSeq = 0;
  #unackedMessages = 0;
  #unackedBytes = 0;
  #buffer = new Map<number, WireMessage>();
  /** `from` and `to` of the replay this client asked for and awaits (`from` 0: none). */
  #replayFrom = 0;
  #replayTo = 0;
  /** Whether that replay probes for messages the client has no evidence of (a dropped tail). */
  #probing = false;
  /** Last time there was a sign of dropped frames: a gap, a cut-short resume, a window under pressure. */
  #dropRiskAt = 0;
  #tailTimer: Timer | undefined;
  #replayStartSeq = 0;
  /** Message frames received since the replay request went out. */
  #framesSinceReplay = 0;
  /** A replay came back empty because the window was full: ask again when the next frame frees some. */
  #replayAfterNextFrame = false;
  #connectTimer: Timer | undefined;
  #pingTimer: ReturnType<typeof setInterval> | undefined;
  #pongTimer: Timer | undefined;
  #ackTimer: Timer | undefined;
  /** Runs while a gap is open; reset by progress, it resumes over a new connection when it fires. */
  #gapTimer: Timer | undefined;

  // Outbound frames wait here for the frame budget, in priority order: the
  // ack (it frees window space), the replay request, then publishes.
  #ackWanted = false;
  #lastAckAt = 0;
  #replayFrame: string | null = null;
  /** Publishes not yet sent; they survive reconnects because the server never saw them. */
  #queued: Array<{ frame: ClientFrame & { id: string }; publish: PendingPublish }> = [];
  #budget = this.#pacing.burst;
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
    this.#pingIntervalMs = opts.pingIntervalMs ?? DEFAULTS.PING_INTERVAL_SECONDS * 1000;
    this.#pongTimeoutMs = opts.pongTimeoutMs ?? 10_000;
    this.#connectTimeoutMs = opts.connectTimeoutMs ?? 10_000;
    this.#ackEveryMessages = Math.max(1, opts.ackEveryMessages ?? 64);
    this.#ackDelayMs = opts.ackDelayMs ?? 250;
    this.#replayTimeoutMs = opts.replayTimeoutMs ?? 5000;
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
    clearTimeout(this.#gapTimer);
    clearTimeout(this.#pumpTimer);
    clearTimeout(this.#tailTimer);
    this.#pongTimer = this.#ackTimer = this.#gapTimer = this.#pumpTimer = this.#tailTimer = undefined;
    this.#dropRiskAt = 0;
    this.#ackWanted = false;
    this.#replayFrame = null;
    this.#openedAt = 0;
    this.#epochReported = false;
    this.#replayFrom = 0;
    this.#replayAfterNextFrame = false;
    // Everything after the last delivered seq is resent on resume.
    this.#buffer.clear();
    this.#unackedMessages = this.#unackedBytes = 0;
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
    // Only message frames count against the window; control events are free.
    if (parsed.value[0]?.type === "message") {
      const bytes = utf8Length(data);
      this.#unackedBytes += bytes;
      this.#unackedMessages += parsed.value.length;
      this.#messageBytes = (this.#messageBytes * 7 + bytes / parsed.value.length) / 8;
      this.#framesSinceReplay++;
      this.#armTailProbe();
    }
    const socket = this.#socket;
    const replayWanted = this.#replayAfterNextFrame;
    for (const event of parsed.value) {
      this.#onEvent(event);
      // A listener may have closed the client, or a fallback replaced the socket.
      if (this.#socket !== socket) return;
    }
    if (replayWanted && this.#replayAfterNextFrame) {
      this.#replayAfterNextFrame = false;
      this.#requestGap();
    }
    this.#maybeAck();
  }

  #onEvent(event: ServerEvent): void {
    switch (event.type) {
      case "welcome":
        return this.#onWelcome(event);
      case "message":
        return this.#onMessage(event);
      case "lost":
        return this.#onLost(event);
      case "replayed":
        return this.#onReplayed(event);
      case "dropped":
        // The room names what it dropped, so a dropped tail needs no probe to be found.
        this.#droppedSeq = Math.max(this.#droppedSeq, event.to);
        this.#noteDropRisk();
        return this.#requestGap();
      case "published":
        this.#settlePublish(event.id, (p) => p.resolve(event.seq));
        return;
      case "error":
        return this.#onServerError(event);
    }
  }

  #onWelcome(welcome: WireWelcome): void {
    clearTimeout(this.#connectTimer);
    this.#welcomeSeq = welcome.seq;
    this.#openedAt = Date.now();
    this.#window = welcome.window > 0 ? welcome.window : DEFAULTS.WINDOW_BYTES;
    const epochChanged = this.#epoch !== undefined && this.#epoch !== welcome.epoch;
    this.#epoch = welcome.epoch;
    if (this.#lastSeq === undefined) {
      this.#lastSeq = welcome.seq;
    } else if (epochChanged) {
      this.#droppedSeq = 0;
      // The history the position referred to is gone (the server says so
      // too; the report is made once): continue from the room's present.
      this.#reportEpochLoss(1, welcome.seq);
      if (this.#socket === null) return;
    }
    this.#ackedSeq = this.#receivedSeq = this.#lastSeq!;
    // A new socket starts with a full budget at the room.
    if (welcome.rate) this.#pacing = pacingFor(welcome.rate);
    this.#budget = this.#pacing.burst;
    this.#refilledAt = Date.now();
    this.#setState("open");
    if (this.#state === "open") this.#pump();
  }

  #reportEpochLoss(from: number, to: number): void {
    if (this.#epochReported) return;
    this.#epochReported = true;
    this.#lastSeq = this.#welcomeSeq;
    this.dispatchEvent(new RoomLostEvent("epoch", from, to));
  }

  #onMessage(message: WireMessage): void {
    this.#receivedSeq = Math.max(this.#receivedSeq, message.seq);
    const last = this.#lastSeq ?? message.seq - 1;
    if (message.seq <= last) return; // Already delivered.
    if (message.seq === last + 1) {
      this.#deliver(message);
      this.#drainBuffer();
    } else {
      this.#buffer.set(message.seq, message);
      this.#noteDropRisk();
      this.#requestGap();
    }
  }

  #deliver(message: WireMessage): void {
    this.#lastSeq = message.seq;
    this.dispatchEvent(new RoomMessageEvent<T>(message.seq, message.data as T, message.ts));
  }

  /** Delivers buffered messages that are now next in line. */
  #drainBuffer(): void {
    const socket = this.#socket;
    for (let next = this.#buffer.get(this.#lastSeq! + 1); next; next = this.#buffer.get(this.#lastSeq! + 1)) {
      this.#buffer.delete(next.seq);
      this.#deliver(next);
      if (this.#socket !== socket) return;
    }
    for (const seq of this.#buffer.keys()) if (seq <= this.#lastSeq!) this.#buffer.delete(seq);
  }

  #onLost(lost: WireLost): void {
    if (lost.reason === "epoch") {
      this.#reportEpochLoss(lost.from, lost.to);
      return;
    }
    const last = this.#lastSeq ?? lost.from - 1;
    if (lost.to <= last) return;
    // Events arrive in seq order, so nothing between `last` and `lost.from` is still coming either.
    this.#lastSeq = lost.to;
    this.dispatchEvent(new RoomLostEvent("history", last + 1, lost.to));
    if (this.#socket) this.#drainBuffer();
  }

  // -------------------------------------------------------------------------
  // Gap repair: the server dropped live frames while this socket's window was
  // full, or cut a resume short at the window. Ask for the missing range from
  // history and hold later messages until it is filled.
  // -------------------------------------------------------------------------

  /**
   * Asks for the first missing range: up to the first held message, else up
   * to the room's position at the welcome, else (when `probe`) whatever
   * follows the last delivered message.
   */
  #requestGap(probe = false): void {
    if (this.#replayFrom !== 0) return;
    let to = probe ? Infinity : Math.max(this.#welcomeSeq, this.#droppedSeq);
    if (this.#buffer.size > 0) {
      to = Infinity;
      for (const seq of this.#buffer.keys()) to = Math.min(to, seq - 1);
    }
    const from = this.#lastSeq! + 1;
    if (from > to) {
      clearTimeout(this.#gapTimer);
      this.#gapTimer = undefined;
      return;
    }
    // Ask for half a window at a time: a replay frame that cannot fit beside
    // the live frames in flight would never be sent.
    to = Math.min(to, from + Math.max(1, Math.floor(this.#window / 2 / this.#messageBytes)) - 1);
    this.#replayFrom = from;
    this.#replayTo = to;
    this.#probing = probe && this.#buffer.size === 0;
    this.#replayStartSeq = this.#lastSeq!;
    this.#framesSinceReplay = 0;
    // The replay needs window space: the ack goes out first and frees what was received so far.
    this.#ackWanted = true;
    this.#replayFrame = JSON.stringify({ type: "replay", from, to } satisfies ClientFrame);
    this.#pump();
    this.#gapTimer ??= setTimeout(() => this.#abandon("gap not repaired in time"), this.#replayTimeoutMs);
  }

  #onReplayed(replayed: WireReplayed): void {
    if (this.#replayFrom === 0 || replayed.from !== this.#replayFrom) {
      // The end of the replay a resume starts with: continue it if the window cut it short.
      if (replayed.truncated) {
        this.#noteDropRisk();
        this.#requestGap();
      }
      return;
    }
    this.#replayFrom = 0;
    if (this.#lastSeq !== this.#replayStartSeq) {
      clearTimeout(this.#gapTimer);
      this.#gapTimer = undefined;
    } else if (replayed.truncated && this.#framesSinceReplay === 0) {
      // Live frames filled the window first and are still on their way: acking them makes room.
      this.#replayAfterNextFrame = true;
      return;
    }
    // A probe that came back full may have more behind it.
    this.#requestGap(this.#probing && !replayed.truncated && replayed.to >= this.#replayTo);
  }

  /**
   * A frame dropped at the end of a burst leaves no seq jump behind it. While
   * drops are plausible, a lull after messages asks whether anything followed.
   */
  #noteDropRisk(): void {
    this.#dropRiskAt = Date.now();
    this.#armTailProbe();
  }

  #armTailProbe(): void {
    if (this.#dropRiskAt === 0 || Date.now() - this.#dropRiskAt > DROP_RISK_MS) return;
    clearTimeout(this.#tailTimer);
    this.#tailTimer = setTimeout(() => this.#requestGap(true), TAIL_PROBE_QUIET_MS);
  }

  // -------------------------------------------------------------------------
  // Acknowledgements: batched so they stay a small fraction of traffic, but
  // early enough that the server never has to drop frames for this socket.
  // An ack releases the window bytes of every frame sent before it whose
  // seqs are all <= its seq, so it names the highest seq received, even past
  // a gap being repaired (held messages are no longer in flight, and counting
  // them would leave the replay that fills the gap no room), and it is sent
  // again for replayed frames even when that seq has not moved.
  // -------------------------------------------------------------------------

  #maybeAck(): void {
    if (this.#unackedMessages === 0 || this.#ackWanted) return;
    if (this.#unackedMessages >= this.#ackEveryMessages || this.#unackedBytes * 2 >= this.#window) {
      clearTimeout(this.#ackTimer);
      const wait = this.#lastAckAt + this.#pacing.ackMinIntervalMs - Date.now();
      this.#ackTimer = wait > 0 ? setTimeout(() => this.#flushAck(), wait) : undefined;
      if (wait <= 0) this.#flushAck();
    } else {
      this.#ackTimer ??= setTimeout(() => this.#flushAck(), this.#ackDelayMs);
    }
  }

  #flushAck(): void {
    clearTimeout(this.#ackTimer);
    this.#ackTimer = undefined;
    this.#ackWanted = true;
    this.#pump();
  }

  /** The seq an ack sent now would carry, or undefined when there is nothing to acknowledge. */
  #ackSeq(): number | undefined {
    if (this.#lastSeq === undefined) return undefined;
    const seq = Math.max(this.#lastSeq, this.#receivedSeq);
    return seq !== this.#ackedSeq || this.#unackedMessages > 0 ? seq : undefined;
  }

  // -------------------------------------------------------------------------
  // Outbound frames, within the frame budget
  // -------------------------------------------------------------------------

  /** Sends whatever is waiting, as far as the budget allows; retries when it has refilled. */
  #pump(): void {
    clearTimeout(this.#pumpTimer);
    this.#pumpTimer = undefined;
    const socket = this.#socket;
    if (!socket || socket.readyState !== OPEN || this.#state !== "open") return;
    if (this.#ackWanted && this.#ackSeq() === undefined) this.#ackWanted = false;
    while (this.#ackWanted || this.#replayFrame !== null || this.#queued.length > 0) {
      const now = Date.now();
      this.#budget = Math.min(this.#pacing.burst, this.#budget + ((now - this.#refilledAt) / 1000) * this.#pacing.rate);
      this.#refilledAt = now;
      if (this.#budget < 1) {
        this.#pumpTimer = setTimeout(() => this.#pump(), Math.ceil(((1 - this.#budget) / this.#pacing.rate) * 1000));
        return;
      }
      this.#budget -= 1;
      if (this.#ackWanted) {
        const seq = this.#ackSeq()!;
        this.#ackWanted = false;
        if (!this.#send(JSON.stringify({ type: "ack", seq } satisfies ClientFrame))) return;
        // Half a window unacknowledged: the server may have run out of room meanwhile.
        if (this.#unackedBytes * 2 >= this.#window) this.#noteDropRisk();
        this.#ackedSeq = seq;
        this.#lastAckAt = now;
        this.#unackedMessages = this.#unackedBytes = 0;
      } else if (this.#replayFrame !== null) {
        const frame = this.#replayFrame;
        this.#replayFrame = null;
        if (!this.#send(frame)) return;
      } else {
        const { frame, publish } = this.#queued.shift()!;
        let text: string;
        try {
          text = JSON.stringify(frame);
        } catch (error) {
          publish.reject(new PublishError("bad_request", describe(error)));
          continue;
        }
        this.#pending.set(frame.id, publish);
        if (!this.#send(text)) {
          this.#pending.delete(frame.id);
          this.#queued.unshift({ frame, publish });
          return;
        }
      }
    }
  }

  // -------------------------------------------------------------------------
  // Publishing and errors
  // -------------------------------------------------------------------------

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
