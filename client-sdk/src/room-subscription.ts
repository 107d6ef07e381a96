import { PublishError, RoomCustomEvent, RoomErrorEvent, RoomLostEvent, RoomMessageEvent, RoomPresenceEvent } from "./events.js";
import type { CustomServerEvent, LostEvent, PresenceEvent, ServerMessage, SubscribeFrame, SubscribedEvent } from "../../protocol/index.js";
import { RoomPosition, type Admission } from "./position.js";
import { PresenceView, type RoomPresence } from "./presence.js";
import { SubscriptionStateEvent, type RoomSubscriptionEventMap, type SubscriptionCause, type SubscriptionState } from "./subscription-events.js";
import { RoomEventTarget } from "./typed-target.js";

/**
 * Where a subscription starts: after `since`, in the history named `epoch`; absent, at the room's present.
 *
 * @see client-sdk/README.md#roomsubscription
 */
export interface RoomSubscriptionOptions {
  /** Resume after this seq instead of starting at the room's current position. */
  since?: number;
  /** Epoch that `since` belongs to, so a lost history is detected. */
  epoch?: string;
}

/** What a subscription asks of the client whose connection it shares (FanoutClient gives it one). */
export interface SubscriptionLink {
  /** Publishes into the subscription's room once it is subscribed. */
  publish(subscription: RoomSubscription, data: unknown): Promise<number>;
  /** The application unsubscribed: the connection stops following the room. */
  leave(subscription: RoomSubscription): void;
}

/**
 * One room followed over a shared connection (`FanoutClient.room()`): its
 * own position, presence, events and publishes, with the single-room
 * guarantees (every message once and in order, across reconnects: after
 * each one the room is asked for again after its last message).
 *
 * Events: `message`, `presence`, `lost`, `custom` and `error` as on a
 * `RoomClient`, and `state` (SubscriptionStateEvent: subscribing,
 * subscribed, unsubscribed, with a typed cause). The connection's own state
 * is the client's.
 *
 * @typeParam T the type of message data.
 * @typeParam I the type of member data (a token's `info`).
 *
 * @example
 * ```ts
 * const lobby = client.room<Chat>("lobby");
 * lobby.addEventListener("message", (e) => render(e.seq, e.data));
 * lobby.addEventListener("state", (e) => { if (e.cause === "forbidden") showNoAccess(); });
 * ```
 *
 * @see client-sdk/README.md#roomsubscription
 */
export class RoomSubscription<T = unknown, I = unknown> extends RoomEventTarget<RoomSubscriptionEventMap<T, I>> {
  /** The room's name. */
  readonly room: string;

  #state: SubscriptionState;
  #position: RoomPosition;
  #link: SubscriptionLink;
  readonly #presence = new PresenceView<I>();

  /** Made by `FanoutClient.room()`, which owns the connection it shares. */
  constructor(room: string, options: RoomSubscriptionOptions, state: SubscriptionState, link: SubscriptionLink) {
    super();
    this.room = room;
    this.#state = state;
    this.#position = new RoomPosition(options);
    this.#link = link;
  }

  /** Where the subscription stands. */
  get state(): SubscriptionState {
    return this.#state;
  }

  /** Seq of the last message delivered (or the room's position when none was yet). */
  get lastSeq(): number | undefined {
    return this.#position.lastSeq;
  }

  /** Identity of the room history `lastSeq` belongs to. */
  get epoch(): string | undefined {
    return this.#position.epoch;
  }

  /**
   * Who is in the room, as last heard: its member count, and its members by
   * id (null above the room's member cap). Replaced by a fresh picture each
   * time the room is subscribed.
   */
  get presence(): RoomPresence<I> {
    return this.#presence;
  }

  /**
   * Publishes `data` into the room over the shared connection, once the room
   * is subscribed. Resolves with the message's seq. Rejects with a
   * PublishError when the server refuses it, with "too_large" before
   * sending anything when its JSON is over the connection's
   * `maxMessageBytes`, with "unconfirmed" when the connection ended before
   * the server answered (it is not re-sent), and with "closed" when the
   * subscription ends first.
   *
   * @param data the message's data, a JSON value.
   * @returns the message's seq.
   */
  publish(data: T): Promise<number> {
    if (this.#state === "unsubscribed") return Promise.reject(new PublishError("closed", "the subscription has ended"));
    if (data === undefined) return Promise.reject(new PublishError("bad_request", "data must be a JSON value"));
    return this.#link.publish(this as RoomSubscription, data);
  }

  /** Stops following the room, for good; the client's other rooms go on. */
  unsubscribe(): void {
    if (this.#state === "unsubscribed") return;
    this.#link.leave(this as RoomSubscription);
    this._change("unsubscribed", "unsubscribe");
  }

  // -------------------------------------------------------------------------
  // Called by the FanoutClient that routes the connection's events.

  /** @internal The subscribe frame that continues after the position. */
  _subscribeFrame(): string {
    const since = this.#position.lastSeq;
    return JSON.stringify({ type: "subscribe", room: this.room, since, epoch: since === undefined ? undefined : this.#position.epoch } satisfies SubscribeFrame);
  }

  /** @internal The server follows the room on this connection, from `event`'s position. */
  _subscribed(event: SubscribedEvent): void {
    this.#position.welcome(event);
    this._change("subscribed", "subscribed");
  }

  /** @internal A message of the room; delivered when it is the next in order. */
  _message(message: ServerMessage): Admission {
    const expected = this.#position.expected;
    const admission = this.#position.admit(message);
    if (admission === "deliver") this.dispatchEvent(new RoomMessageEvent<T>(message.seq, message.data as T, message.ts));
    else if (admission === "gap") this._error("bad_frame", `expected seq ${expected}, got ${message.seq}`);
    return admission;
  }

  /** @internal */
  _presence(event: PresenceEvent): void {
    const change = this.#presence.apply(event);
    this.dispatchEvent(new RoomPresenceEvent<I>(change.action, change.member, this.#presence));
  }

  /** @internal */
  _lost(event: LostEvent): void {
    if (this.#position.lost(event)) this.dispatchEvent(new RoomLostEvent(event.reason, event.from, event.to));
  }

  /** @internal */
  _custom(event: CustomServerEvent): void {
    this.dispatchEvent(new RoomCustomEvent(event));
  }

  /** @internal */
  _error(code: RoomErrorEvent["code"], message: string): void {
    this.dispatchEvent(new RoomErrorEvent(code, message));
  }

  /** @internal The connection ended: what its room announced ends with it. */
  _connectionEnded(): void {
    this.#position.reset();
  }

  /** @internal */
  _change(state: SubscriptionState, cause: SubscriptionCause, code?: SubscriptionStateEvent["code"], reason?: string): void {
    const previous = this.#state;
    if (previous === state) return;
    this.#state = state;
    this.dispatchEvent(new SubscriptionStateEvent(state, previous, cause, code, reason));
  }
}
