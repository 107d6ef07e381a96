import { AckPacer, DEFAULT_ACK_DELAY_MS } from "./acks.js";
import { DEFAULT_BACKOFF, type BackoffOptions } from "./backoff.js";
import { Connection } from "./connection.js";
import { ControlQueue } from "./control-queue.js";
import { RoomCustomEvent, RoomErrorEvent, RoomStateEvent, type ConnectionState, type StateCause } from "./events.js";
import { Outbox } from "./outbox.js";
import {
  CloseCode,
  PING_INTERVAL_SECONDS,
  isCustomType,
  isValidRoomName,
  parseServerFrame,
  type AuthFrame,
  type ConnectionWelcomeEvent,
  type CustomServerEvent,
  type ErrorCode,
  type MultiplexEvent,
  type RoomAckFrame,
  type ServerError,
  type UnsubscribeFrame,
} from "../../protocol/index.js";
import { RateBudget } from "./rate-budget.js";
import { RoomSubscription, type RoomSubscriptionOptions, type SubscriptionLink } from "./room-subscription.js";
import { ConnectionAuthorizedEvent, TokenRefreshError, type FanoutClientEventMap, type SubscriptionCause } from "./subscription-events.js";
import { TokenRefresh } from "./token-refresh.js";
import { describe, type WebSocketConstructor } from "./transport.js";
import { RoomEventTarget } from "./typed-target.js";
import { multiplexSocketUrl, type ServiceAddress } from "./url.js";

/**
 * Where a `FanoutClient` connects, and how it keeps its one connection: its
 * backoff, heartbeat, timeouts, ack pace and token refresh. Where each room
 * starts is `FanoutClient.room`'s.
 *
 * @example
 * ```ts
 * const client = new FanoutClient({ url: "wss://fanout.example.com/realtime/ws", token: getToken, refreshBeforeExpiryMs: 120_000 });
 * ```
 *
 * @see client-sdk/README.md#fanoutclient
 */
export interface FanoutClientOptions extends ServiceAddress {
  /** WebSocket URL of the service's multiplexed connection (ws:, wss:, http: or https:), e.g. "wss://example.com/ws". */
  url?: string;
  /** WebSocket implementation; the global one when absent (pass `ws` on Node 20). */
  WebSocket?: WebSocketConstructor;
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
   * After a ping, how long to wait for any frame before the connection counts as dead, milliseconds.
   * @default 10_000
   */
  pongTimeoutMs?: number;
  /**
   * How long a connection attempt may take until the welcome, a token function's wait included, milliseconds.
   * @default 10_000
   */
  connectTimeoutMs?: number;
  /**
   * Longest wait before acknowledging a frame, milliseconds. One window
   * covers every room of the connection: half of it unacknowledged acks
   * every room at once; otherwise one ack per room covers this span.
   * @default 1000
   */
  ackDelayMs?: number;
  /**
   * With a token function: how long before the connection's token expires
   * the client sends the server a fresh one (`auth`), without reconnecting,
   * milliseconds. The expiry is the token's JWT `exp`, or what the server
   * answered the last refresh; a token that lives shorter is refreshed at
   * half its remaining life. 0: never (the server then closes the connection
   * with 4001 at expiry, and the client reconnects with a new token).
   * @default 60_000
   */
  refreshBeforeExpiryMs?: number;
}

/**
 * What a multiplexed connection's welcome announced: its window, budgets and limits.
 *
 * @see client-sdk/README.md#limits
 */
export type ConnectionLimits = Omit<ConnectionWelcomeEvent, "type">;

/** Default `refreshBeforeExpiryMs`, milliseconds. */
export const DEFAULT_REFRESH_BEFORE_EXPIRY_MS = 60_000;

/** How long a subscribe the server refused for the subscribe rate waits before it is asked again. */
const SUBSCRIBE_RETRY_MS = 1000;

/**
 * One connection to the service (`/ws`) that follows many rooms: browsers
 * cap the sockets a page may hold per host, and every socket costs a mobile
 * radio its own keepalives, so an application with several rooms on screen
 * shares one. `room(name)` gives a `RoomSubscription` with the events and
 * guarantees of a `RoomClient`; the client keeps the connection up
 * (backoff, heartbeats, tokens) and, after every reconnect, asks for each
 * room again after its last message.
 *
 * Events: `state` (RoomStateEvent: the connection's), `error`
 * (RoomErrorEvent: what belongs to no room), `authorized`
 * (ConnectionAuthorizedEvent: a token refresh took) and `custom`.
 *
 * @example
 * ```ts
 * import { FanoutClient } from "@edge-fanout/client";
 *
 * const client = new FanoutClient({ host: "example.com", token: getToken });
 * const lobby = client.room<{ text: string }>("lobby");
 * lobby.addEventListener("message", (e) => console.log(e.seq, e.data.text));
 * const seq = await lobby.publish({ text: "hi" });
 * ```
 *
 * @see client-sdk/README.md#many-rooms-over-one-connection
 */
export class FanoutClient extends RoomEventTarget<FanoutClientEventMap> {
  /** The connection's WebSocket URL, without the token. */
  readonly url: string;

  #connection: Connection;
  /** The connection's frame budget: publishes, subscribes, unsubscribes and refreshes all spend it. */
  #frameBudget = new RateBudget();
  #subscribeBudget = new RateBudget();
  #outbox: Outbox;
  #control: ControlQueue;
  #acks: AckPacer<string>;
  #refresh: TokenRefresh;
  #link: SubscriptionLink;
  #limits: ConnectionLimits | undefined;
  /** Every live subscription by room, in the order they were made: a reconnect asks for them in that order. */
  #rooms = new Map<string, RoomSubscription>();

  // Per connection, cleared when it ends.
  /** Subscriptions whose subscribe is queued or sent: asking twice would be a second subscribe. */
  #asked = new Set<RoomSubscription>();
  /** Subscriptions whose subscribe went out: the server answers for them, and may follow their room. */
  #sent = new Set<RoomSubscription>();
  /** Unsubscribes sent and not yet answered, by room: their answer is no news. */
  #leaving = new Map<string, number>();

  /**
   * Connects right away; rooms can be added at any time.
   * @param [options={}] where to connect (the page's host when absent), and how.
   * @throws {TypeError} for an unusable address, no WebSocket, or a fixed token that cannot travel where `tokenIn` says.
   */
  constructor(options: FanoutClientOptions = {}) {
    super();
    this.url = multiplexSocketUrl(options);
    const Impl = options.WebSocket ?? (globalThis.WebSocket as WebSocketConstructor | undefined);
    if (!Impl) {
      throw new TypeError("no global WebSocket: pass one in the options, e.g. { WebSocket } from the ws package");
    }
    const { token } = options;
    this.#acks = new AckPacer(options.ackDelayMs ?? DEFAULT_ACK_DELAY_MS, (room, ack) =>
      this.#connection.send(JSON.stringify({ type: "ack", room, seq: ack.seq, tag: ack.tag } satisfies RoomAckFrame)),
    );
    this.#connection = new Connection(
      {
        WebSocket: Impl,
        backoff: { ...DEFAULT_BACKOFF, ...options.backoff },
        stableAfterMs: options.stableAfterMs ?? 5000,
        pingIntervalMs: options.pingIntervalMs ?? PING_INTERVAL_SECONDS * 1000,
        pongTimeoutMs: options.pongTimeoutMs ?? 10_000,
        connectTimeoutMs: options.connectTimeoutMs ?? 10_000,
        token,
        tokenIn: options.tokenIn ?? "subprotocol",
      },
      {
        url: () => this.url,
        frame: (text) => this.#onFrame(text),
        error: (code, message) => this.#emitError(code, message),
        state: (next, previous, cause, code, reason) => this.#onState(next, previous, cause, code, reason),
        ended: () => this.#connectionEnded(),
      },
    );
    this.#outbox = new Outbox(this.#connection, this.#frameBudget);
    this.#control = new ControlQueue(this.#connection, this.#frameBudget);
    const connection = this.#connection;
    this.#refresh = new TokenRefresh(options.refreshBeforeExpiryMs ?? DEFAULT_REFRESH_BEFORE_EXPIRY_MS, typeof token === "function" ? token : undefined, {
      get writable() {
        return connection.writable;
      },
      sendAuth: (fresh) => this.#control.push(() => JSON.stringify({ type: "auth", token: fresh } satisfies AuthFrame)),
      failed: (error) => {
        // A refresh cut short by the connection's end is no news: the next connection opens with a fresh token.
        if (error.code !== "unconfirmed" && error.code !== "closed") this.#emitError(error.code, `token refresh: ${error.message}`);
      },
    });
    this.#link = {
      publish: (subscription, data) => this.#outbox.publish(data, subscription.room, () => subscription.state === "subscribed"),
      leave: (subscription) => this.#leave(subscription),
    };
    this.#connection.start();
  }

  /** The connection's state. */
  get state(): ConnectionState {
    return this.#connection.state;
  }

  /** What the current (or last) connection's welcome announced; undefined before the first welcome. */
  get limits(): ConnectionLimits | undefined {
    return this.#limits;
  }

  /** The live subscriptions, by room. */
  get rooms(): ReadonlyMap<string, RoomSubscription> {
    return this.#rooms;
  }

  /**
   * The subscription to `room`: the one the client has, or a new one that
   * subscribes as soon as the connection is open (then `options` say where
   * it starts). The server may refuse it (the token does not grant the
   * room, the connection follows `maxRooms` already): the subscription then
   * ends with that cause, and the connection and its other rooms go on.
   * On a closed client it is born unsubscribed.
   *
   * @typeParam T the type of the room's message data.
   * @typeParam I the type of its member data.
   * @param room the room's name.
   * @param [options={}] where a new subscription starts: after `since` in `epoch`, or at the room's present.
   * @returns the room's subscription.
   * @throws {TypeError} for an invalid room name.
   *
   * @example
   * ```ts
   * const news = client.room<{ title: string }>("news", { since: 41, epoch: "k3v9x2" }); // resumes after seq 41
   * news.addEventListener("lost", () => reloadNews());
   * ```
   *
   * @see client-sdk/README.md#roomsubscription
   */
  room<T = unknown, I = unknown>(room: string, options: RoomSubscriptionOptions = {}): RoomSubscription<T, I> {
    const existing = this.#rooms.get(room);
    if (existing) return existing as RoomSubscription<T, I>;
    if (!isValidRoomName(room)) throw new TypeError(`invalid room name ${JSON.stringify(room)}`);
    const closed = this.state === "closed";
    const subscription = new RoomSubscription<T, I>(room, options, closed ? "unsubscribed" : "subscribing", this.#link);
    if (closed) return subscription;
    this.#rooms.set(room, subscription as RoomSubscription);
    if (this.state === "open") this.#ask(subscription as RoomSubscription);
    return subscription;
  }

  /**
   * Gives the open connection a fresh token (`auth`) without reconnecting:
   * `token`, or the token function's next one. Its grants replace the old
   * ones: a room the new token does not grant ends with cause "forbidden".
   * A `token` given here also replaces a fixed `token` option for later
   * connections (a token function is still asked before each). Resolves with
   * the new token's expiry (seconds since the epoch) once the server took
   * it; rejects with a TokenRefreshError otherwise.
   *
   * @param token a fresh token; absent, the token function's next one.
   * @returns the new token's expiry, seconds since the epoch.
   *
   * @example
   * ```ts
   * const exp = await client.refreshToken(await getToken());
   * ```
   *
   * @see client-sdk/README.md#token-refresh-on-the-open-connection
   */
  refreshToken(token?: string): Promise<number> {
    if (this.state === "closed") return Promise.reject(new TokenRefreshError("closed", "the client is closed"));
    if (token !== undefined) {
      try {
        if (token === "") throw new TypeError("the token is empty");
        this.#connection.replaceFixedToken(token);
      } catch (error) {
        return Promise.reject(new TokenRefreshError("bad_request", describe(error)));
      }
    }
    return this.#refresh.refresh(token);
  }

  /**
   * Closes the connection for good; every subscription ends ("connection_closed").
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
      const message = cause === "client_closed" ? "the client was closed" : `the server closed the connection (${code})`;
      this.#outbox.close(message);
      this.#refresh.ended("closed", message);
    }
    this.dispatchEvent(new RoomStateEvent(next, previous, cause, code, reason));
    // Then what the change does to each room; a listener may have changed the state meanwhile.
    if (this.state !== next) return;
    if (next === "closed") {
      for (const subscription of [...this.#rooms.values()]) this.#end(subscription, "connection_closed");
    } else if (next === "reconnecting") {
      for (const subscription of [...this.#rooms.values()]) if (subscription.state === "subscribed") subscription._change("subscribing", "connection_lost");
    } else if (next === "open") {
      for (const subscription of this.#rooms.values()) this.#ask(subscription);
      this.#outbox.pump();
      this.#refresh.opened(this.#connection.token);
    }
  }

  #connectionEnded(): void {
    this.#acks.reset();
    this.#outbox.connectionEnded();
    this.#control.clear();
    this.#asked.clear();
    this.#sent.clear();
    this.#leaving.clear();
    this.#refresh.ended("unconfirmed", "the connection ended before the server took the token");
    for (const subscription of this.#rooms.values()) subscription._connectionEnded();
  }

  /** Queues the subscribe of `subscription` on the open connection, once per connection. */
  #ask(subscription: RoomSubscription): void {
    if (this.#asked.has(subscription)) return;
    this.#asked.add(subscription);
    this.#control.push(
      // Made when it goes, from the position it then has; nothing when the room was left meanwhile.
      () => (this.#asked.has(subscription) ? subscription._subscribeFrame() : null),
      this.#subscribeBudget,
      () => this.#sent.add(subscription),
    );
  }

  /** The application unsubscribed. */
  #leave(subscription: RoomSubscription): void {
    const { room } = subscription;
    if (this.#rooms.get(room) !== subscription) return;
    this.#rooms.delete(room);
    this.#asked.delete(subscription);
    this.#outbox.close("the subscription has ended", room);
    if (!this.#sent.delete(subscription)) {
      this.#acks.forget(room);
      return;
    }
    // The server may follow the room: free what it has in the window, then leave it.
    this.#acks.forget(room, true);
    this.#control.push(
      () => JSON.stringify({ type: "unsubscribe", room } satisfies UnsubscribeFrame),
      undefined,
      () => this.#leaving.set(room, (this.#leaving.get(room) ?? 0) + 1),
    );
  }

  /** The server (or the connection's end) ended `subscription`. */
  #end(subscription: RoomSubscription, cause: SubscriptionCause, code?: ErrorCode, reason?: string): void {
    const { room } = subscription;
    if (this.#rooms.get(room) === subscription) this.#rooms.delete(room);
    this.#asked.delete(subscription);
    this.#sent.delete(subscription);
    this.#acks.forget(room);
    this.#outbox.close(`the subscription has ended (${cause})`, room);
    subscription._change("unsubscribed", cause, code, reason);
  }

  /** The server refused a subscribe. */
  #refused(subscription: RoomSubscription, error: ServerError): void {
    this.#asked.delete(subscription);
    this.#sent.delete(subscription);
    if (error.code === "rate_limited") {
      // Over the connection's subscribe budget: asked again shortly (the room stays "subscribing").
      subscription._error(error.code, error.message);
      setTimeout(() => {
        if (this.#rooms.get(subscription.room) === subscription && this.state === "open") this.#ask(subscription);
      }, SUBSCRIBE_RETRY_MS);
      return;
    }
    const cause = error.code === "forbidden" || error.code === "too_many_rooms" ? error.code : "refused";
    this.#end(subscription, cause, error.code, error.message);
  }

  #onFrame(text: string): void {
    const parsed = parseServerFrame(text);
    if (!parsed.ok) {
      this.#emitError("bad_frame", parsed.error);
      return;
    }
    const generation = this.#connection.generation;
    let counts = false;
    for (const event of parsed.value as MultiplexEvent[]) {
      if (this.#onEvent(event)) counts = true;
      // A listener may have closed the client, or the socket was abandoned.
      if (this.#connection.generation !== generation) return;
    }
    if (counts) this.#acks.count(text);
  }

  /** Handles one event; true when it counts against the window (a message or presence event of a followed room). */
  #onEvent(event: MultiplexEvent): boolean {
    const room = "room" in event && typeof event.room === "string" ? event.room : undefined;
    const subscription = room === undefined ? undefined : this.#rooms.get(room);
    const following = subscription?.state === "subscribed";
    switch (event.type) {
      case "welcome": {
        const { type: _type, ...limits } = event;
        this.#limits = limits;
        this.#acks.setWindow(event.window);
        this.#outbox.welcome(event);
        this.#subscribeBudget.reset(event.subscribeRate);
        this.#connection.established();
        return false;
      }
      case "subscribed":
        if (subscription && this.#sent.has(subscription) && subscription.state === "subscribing") {
          subscription._subscribed(event);
          this.#outbox.pump(); // its publishes were waiting for it
        }
        return false;
      case "message":
        if (!following) return false;
        // Every message counts, a duplicate too: the ack names the last one the frame held.
        this.#acks.owe(room!, event);
        if (subscription._message(event) === "gap") this.#connection.abandon("out_of_order");
        return true;
      case "presence":
        if (!following) return false;
        this.#acks.owe(room!, { seq: subscription.lastSeq ?? 0, tag: event.tag });
        subscription._presence(event);
        return true;
      case "lost":
        if (following) subscription._lost(event);
        return false;
      case "published":
        this.#outbox.settle(event);
        return false;
      case "error":
        if (this.#outbox.settle(event)) return false;
        if (room === undefined) {
          if (!this.#refresh.refused(event)) this.#emitError(event.code, event.message);
        } else if (subscription && subscription.state === "subscribing" && this.#sent.has(subscription)) {
          this.#refused(subscription, event);
        } else if (subscription) {
          subscription._error(event.code, event.message);
        } else {
          this.#emitError(event.code, `${room}: ${event.message}`);
        }
        return false;
      case "unsubscribed": {
        const leaving = this.#leaving.get(event.room) ?? 0;
        if (event.code === undefined && leaving > 0) this.#leaving.set(event.room, leaving - 1); // the answer to ours
        else if (subscription) this.#end(subscription, event.code === "forbidden" ? "forbidden" : "server_unsubscribed", event.code, event.reason);
        return false;
      }
      case "authorized":
        this.#refresh.authorized(event.exp);
        this.dispatchEvent(new ConnectionAuthorizedEvent(event.exp));
        return false;
      default:
        // The rooms' own events; anything else is from a newer protocol and ignored.
        if (isCustomType(event.type)) {
          if (subscription) subscription._custom(event as CustomServerEvent);
          else if (room === undefined) this.dispatchEvent(new RoomCustomEvent(event as CustomServerEvent));
        }
        return false;
    }
  }

  #emitError(code: RoomErrorEvent["code"], message: string): void {
    this.dispatchEvent(new RoomErrorEvent(code, message));
  }
}
