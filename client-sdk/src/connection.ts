import { backoffDelay, type BackoffOptions } from "./backoff.js";
import type { ConnectionState, StateCause } from "./events.js";
import { CloseCode, PING, PONG, SUBPROTOCOL, TOKEN_SUBPROTOCOL_PREFIX, shouldReconnect } from "../../protocol/index.js";
import { OPEN, describe, type WebSocketConstructor, type WebSocketLike } from "./transport.js";
import { UNFIT_TOKEN, fitsSubprotocol, withToken, type TokenIn, type TokenSource } from "./url.js";

/** How the connection behaves; RoomClient fills in the defaults. */
export interface ConnectionOptions {
  WebSocket: WebSocketConstructor;
  backoff: BackoffOptions;
  stableAfterMs: number;
  pingIntervalMs: number;
  pongTimeoutMs: number;
  connectTimeoutMs: number;
  token: TokenSource | undefined;
  tokenIn: TokenIn;
}

/** Why the client itself gives up on a socket; it reconnects after each. */
export type AbandonCause = Extract<StateCause, "no_welcome" | "no_pong" | "out_of_order">;

/** What the connection tells the stream and the client. */
export interface ConnectionHooks {
  /** The URL of the next attempt (the room with its resume position), before the token is added. */
  url(): string;
  /** A text frame from the server, other than the heartbeat's answer. */
  frame(text: string): void;
  /** Something went wrong that does not end the client. */
  error(code: "transport" | "bad_frame" | "token", message: string): void;
  /** The connection changed state. */
  state(next: ConnectionState, previous: ConnectionState, cause: StateCause, code?: number, reason?: string): void;
  /** The current attempt or socket is gone: whatever belonged to it ends too. */
  ended(): void;
}

type Timer = ReturnType<typeof setTimeout>;

/** A fixed token must be able to travel where `tokenIn` says, or no attempt could succeed. */
function checkFixedToken(token: TokenSource | undefined, tokenIn: TokenIn): void {
  if (tokenIn === "subprotocol" && typeof token === "string" && token !== "" && !fitsSubprotocol(token)) throw new TypeError(UNFIT_TOKEN);
}

const noop = (): void => {};
// ws reports an upgrade refused over HTTP only through the error text.
const HTTP_AUTH_REFUSAL = /Unexpected server response: 40([13])\b/;
/** The close code a WebSocket reports when the connection ended without a close frame: the server said nothing. */
const ABNORMAL_CLOSURE = 1006;
/**
 * With a token function, a 4001 (expired or refused token) is worth a new
 * token; the third in a row without a welcome in between means the function
 * gives tokens the server will not take, so the client stops.
 */
const MAX_AUTH_REFUSALS = 3;

/**
 * One connection to a room at a time, kept up: opens the socket (asking a
 * token function first), gives each attempt a deadline until the room's
 * welcome, sends heartbeats and drops a connection that stops answering,
 * and reconnects with jittered backoff after any close whose code says so.
 * It knows nothing of messages: frames go to the hooks.
 */
export class Connection {
  #options: ConnectionOptions;
  #hooks: ConnectionHooks;

  #state: ConnectionState = "connecting";
  #socket: WebSocketLike | null = null;
  /** Bumped when an attempt or socket ends, so callbacks of an older one know they are late. */
  #generation = 0;
  /** Failed attempts in a row: the backoff's exponent. */
  #attempt = 0;
  #authRefusals = 0;
  #reconnectTimer: Timer | undefined;
  /** The token the current attempt or socket opened with. */
  #token: string | undefined;

  // Per attempt, reset by #end.
  #openedAt = 0;
  /** The close code an HTTP refusal of the upgrade stands for (ws reports it only as an error). */
  #httpRefusal: number | null = null;
  #connectTimer: Timer | undefined;
  #pingTimer: ReturnType<typeof setInterval> | undefined;
  #pongTimer: Timer | undefined;

  #onOnline = (): void => this.#networkChanged();

  /** @throws TypeError for a fixed token that cannot travel where `tokenIn` says (no attempt could succeed). */
  constructor(options: ConnectionOptions, hooks: ConnectionHooks) {
    checkFixedToken(options.token, options.tokenIn);
    this.#options = options;
    this.#hooks = hooks;
  }

  /** The token the current connection opened with, if any (a token function's latest answer). */
  get token(): string | undefined {
    return this.#token;
  }

  /**
   * Later attempts open with `token` instead of the fixed token given; a
   * token function, asked before every attempt, stays.
   * @throws TypeError for a token that cannot travel where `tokenIn` says.
   */
  replaceFixedToken(token: string): void {
    if (typeof this.#options.token === "function") return;
    checkFixedToken(token, this.#options.tokenIn);
    this.#options = { ...this.#options, token };
  }

  get state(): ConnectionState {
    return this.#state;
  }

  /** Changes whenever the current socket ends; a frame handler compares it to notice. */
  get generation(): number {
    return this.#generation;
  }

  /** Whether a frame sent now goes out on an open connection. */
  get writable(): boolean {
    return this.#state === "open" && this.#socket?.readyState === OPEN;
  }

  /** Makes the first attempt and follows the browser's network changes. */
  start(): void {
    globalThis.addEventListener?.("online", this.#onOnline);
    this.#connect();
  }

  /** The room welcomed this connection: it is open, and refusals no longer count as a streak. */
  established(): void {
    clearTimeout(this.#connectTimer);
    this.#connectTimer = undefined;
    this.#openedAt = Date.now();
    this.#authRefusals = 0;
    this.#setState("open", "welcome");
  }

  /** Sends `text` on the open socket; false when there is none or it refused. */
  send(text: string): boolean {
    const socket = this.#socket;
    if (!socket || socket.readyState !== OPEN) return false;
    try {
      socket.send(text);
      return true;
    } catch {
      return false;
    }
  }

  /** Gives up on the current socket without waiting for its close handshake, then reconnects. */
  abandon(cause: AbandonCause): void {
    if (this.#state === "closed") return;
    const socket = this.#socket;
    this.#resetBackoffIfStable();
    this.#end();
    try {
      if (socket?.terminate) socket.terminate();
      else socket?.close(CloseCode.NORMAL, cause);
    } catch {
      // The socket is already gone.
    }
    this.#scheduleReconnect(cause);
  }

  /** Closes for good; no reconnect follows. */
  close(code: number, reason: string): void {
    if (this.#state === "closed") return;
    const socket = this.#socket;
    this.#end();
    clearTimeout(this.#reconnectTimer);
    this.#reconnectTimer = undefined;
    globalThis.removeEventListener?.("online", this.#onOnline);
    // Browsers only let applications send 1000 or 3000-4999.
    const sendable = code === CloseCode.NORMAL || (code >= 3000 && code <= 4999) ? code : CloseCode.NORMAL;
    try {
      socket?.close(sendable, reason);
    } catch {
      // Already closing; nothing left to do.
    }
    this.#setState("closed", "client_closed", code, reason);
  }

  // -------------------------------------------------------------------------

  #connect(): void {
    clearTimeout(this.#reconnectTimer);
    this.#reconnectTimer = undefined;
    const generation = ++this.#generation;
    // The deadline covers the token too: a token endpoint that hangs is a failed attempt.
    this.#connectTimer = setTimeout(() => this.#connectTimedOut(generation), this.#options.connectTimeoutMs);
    const source = this.#options.token;
    if (typeof source !== "function") {
      this.#open(source || undefined); // An empty string is no token.
      return;
    }
    // Asked in a microtask, so even the first attempt's failure reaches listeners
    // added right after the constructor.
    Promise.resolve()
      .then(source)
      .then(
        (token) => this.#openWithToken(generation, token),
        (error: unknown) => this.#tokenFailed(generation, describe(error)),
      );
  }

  /** No welcome in time; without a socket yet, the token function is what kept the attempt waiting. */
  #connectTimedOut(generation: number): void {
    if (this.#socket) this.abandon("no_welcome");
    else this.#tokenFailed(generation, "the token function did not answer within connectTimeoutMs");
  }

  #openWithToken(generation: number, token: unknown): void {
    if (generation !== this.#generation || this.#state === "closed") return; // Abandoned or closed meanwhile.
    if (typeof token !== "string" || token === "") this.#tokenFailed(generation, "the token function gave no token");
    else if (this.#options.tokenIn === "subprotocol" && !fitsSubprotocol(token)) this.#tokenFailed(generation, UNFIT_TOKEN);
    else this.#open(token);
  }

  #tokenFailed(generation: number, message: string): void {
    if (generation !== this.#generation || this.#state === "closed") return;
    this.#hooks.error("token", message);
    this.#end();
    this.#scheduleReconnect("token_failed");
  }

  #open(token: string | undefined): void {
    this.#httpRefusal = null;
    this.#token = token;
    let url = this.#hooks.url();
    let protocols: string[] | undefined;
    if (token !== undefined) {
      // Offered as a subprotocol, the token stays out of the URL and so out of access logs;
      // the server selects fanout.v1, which a browser requires of an answer to any offer.
      if (this.#options.tokenIn === "query") url = withToken(url, token);
      else protocols = [SUBPROTOCOL, TOKEN_SUBPROTOCOL_PREFIX + token];
    }
    let socket: WebSocketLike;
    try {
      socket = new this.#options.WebSocket(url, protocols);
    } catch (error) {
      this.#hooks.error("transport", describe(error));
      this.#end();
      this.#scheduleReconnect("network");
      return;
    }
    this.#socket = socket;
    // Every handler checks it still belongs to the current socket: an
    // abandoned socket may keep reporting after a new one took its place.
    socket.onopen = () => {
      if (socket === this.#socket) this.#startHeartbeat();
    };
    socket.onmessage = (event) => {
      if (socket === this.#socket) this.#onMessage(event.data);
    };
    socket.onerror = (event) => {
      if (socket !== this.#socket) return;
      const text = describe(event);
      const refusal = HTTP_AUTH_REFUSAL.exec(text);
      if (refusal) this.#httpRefusal = refusal[1] === "1" ? CloseCode.UNAUTHORIZED : CloseCode.FORBIDDEN;
      this.#hooks.error("transport", text);
    };
    socket.onclose = (event) => {
      if (socket === this.#socket) this.#onClosed(event.code, event.reason);
    };
  }

  #onMessage(data: unknown): void {
    // Any frame proves the connection alive, not only the pong.
    clearTimeout(this.#pongTimer);
    this.#pongTimer = undefined;
    if (typeof data !== "string") {
      this.#hooks.error("bad_frame", "binary frame ignored");
      return;
    }
    if (data !== PONG) this.#hooks.frame(data);
  }

  #onClosed(code: number, reason: string): void {
    this.#resetBackoffIfStable();
    const refused = this.#httpRefusal;
    this.#end();
    const finalCode = refused ?? code;
    const cause: StateCause =
      finalCode === CloseCode.UNAUTHORIZED || finalCode === CloseCode.FORBIDDEN
        ? "auth_refused"
        : finalCode === ABNORMAL_CLOSURE
          ? "network"
          : "server_closed";
    if (finalCode === CloseCode.UNAUTHORIZED && typeof this.#options.token === "function") {
      this.#authRefusals += 1;
      if (this.#authRefusals < MAX_AUTH_REFUSALS) {
        this.#scheduleReconnect(cause, finalCode, reason); // The next attempt asks for a new token.
        return;
      }
    }
    if (refused !== null || !shouldReconnect(finalCode)) {
      globalThis.removeEventListener?.("online", this.#onOnline);
      this.#setState("closed", cause, finalCode, reason);
      return;
    }
    this.#scheduleReconnect(cause, finalCode, reason);
  }

  /** A connection that lasted is not part of a failure streak: the next retry starts the backoff over. */
  #resetBackoffIfStable(): void {
    if (this.#openedAt > 0 && Date.now() - this.#openedAt >= this.#options.stableAfterMs) this.#attempt = 0;
  }

  #scheduleReconnect(cause: StateCause, code?: number, reason?: string): void {
    this.#setState("reconnecting", cause, code, reason);
    // A state listener may have closed the client.
    if (this.#state !== "reconnecting" || this.#reconnectTimer !== undefined) return;
    const delay = backoffDelay(this.#attempt++, this.#options.backoff);
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

  /** Forgets the current attempt and socket, and everything tied to them. */
  #end(): void {
    const socket = this.#socket;
    this.#socket = null;
    this.#generation += 1;
    if (socket) {
      // No-op handlers rather than null: `ws` throws on an error event nobody listens to.
      socket.onopen = socket.onmessage = socket.onclose = socket.onerror = noop;
    }
    clearTimeout(this.#connectTimer);
    clearInterval(this.#pingTimer);
    clearTimeout(this.#pongTimer);
    this.#connectTimer = this.#pingTimer = this.#pongTimer = undefined;
    this.#openedAt = 0;
    this.#hooks.ended();
  }

  #setState(next: ConnectionState, cause: StateCause, code?: number, reason?: string): void {
    const previous = this.#state;
    if (previous === next) return;
    this.#state = next;
    this.#hooks.state(next, previous, cause, code, reason);
  }

  #startHeartbeat(): void {
    this.#pingTimer = setInterval(() => this.#ping(), this.#options.pingIntervalMs);
  }

  #ping(): void {
    this.send(PING);
    this.#pongTimer ??= setTimeout(() => this.abandon("no_pong"), this.#options.pongTimeoutMs);
  }
}
