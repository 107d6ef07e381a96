import type { RoomCustomEvent, RoomErrorEvent, RoomLostEvent, RoomMessageEvent, RoomPresenceEvent, RoomStateEvent } from "./events.js";
import type { ErrorCode } from "../../protocol/index.js";
import { RoomEvent } from "./typed-target.js";

/**
 * Where a room's subscription on a shared connection stands:
 * - "subscribing": asked for, and not (or no longer) followed on an open
 *   connection: the connection is opening, or came back and the room is
 *   asked for again, or the server has not answered yet;
 * - "subscribed": the server follows the room for this connection;
 *   messages arrive;
 * - "unsubscribed": over for good (a subscription does not come back: ask
 *   the client for the room again, with `since` and `epoch` to continue).
 */
export type SubscriptionState = "subscribing" | "subscribed" | "unsubscribed";

/**
 * Why a subscription changed state, for an application to switch on; the
 * server's error code and its words travel beside it
 * (`SubscriptionStateEvent.code`, `.reason`).
 * - "subscribed": the server follows the room ("subscribed");
 * - "connection_lost": the connection dropped; the room is asked for again,
 *   after its last message, on the next one ("subscribing");
 * - "unsubscribe": the application called `unsubscribe()`;
 * - "forbidden": the token does not grant the room: the subscribe was
 *   refused, or a token refresh no longer grants it;
 * - "too_many_rooms": the connection already follows the most rooms it may
 *   (`maxRooms` in the connection's welcome);
 * - "refused": the server refused the subscribe for another reason (`code`,
 *   e.g. "bad_request");
 * - "server_unsubscribed": the server ended the subscription for another
 *   reason (`code`, when it gave one);
 * - "connection_closed": the client's connection stopped for good: `close()`,
 *   or a close that means stop (the client's `state` event says which).
 */
export type SubscriptionCause =
  | "subscribed"
  | "connection_lost"
  | "unsubscribe"
  | "forbidden"
  | "too_many_rooms"
  | "refused"
  | "server_unsubscribed"
  | "connection_closed";

/**
 * A subscription changed state, for the reason `cause` names (a `RoomSubscription`'s `state` event).
 *
 * @example
 * ```ts
 * lobby.addEventListener("state", (e) => {
 *   if (e.state === "unsubscribed" && e.cause === "too_many_rooms") showNoAccess();
 * });
 * ```
 *
 * @see client-sdk/README.md#why-a-subscription-changed-state
 */
export class SubscriptionStateEvent extends RoomEvent {
  constructor(
    /** Where the subscription stands now. */
    readonly state: SubscriptionState,
    /** Where it stood before. */
    readonly previous: SubscriptionState,
    /** Why it changed. */
    readonly cause: SubscriptionCause,
    /** The server's error code, when the server refused or ended the subscription. */
    readonly code?: ErrorCode,
    /** The server's words for it. */
    readonly reason?: string,
  ) {
    super("state");
  }
}

/**
 * The shared connection took a fresh token without reconnecting (a `FanoutClient`'s `authorized` event).
 *
 * @example
 * ```ts
 * client.addEventListener("authorized", (e) => console.log("token good until", new Date(e.exp * 1000)));
 * ```
 *
 * @see client-sdk/README.md#token-refresh-on-the-open-connection
 */
export class ConnectionAuthorizedEvent extends RoomEvent {
  constructor(
    /** When the new token expires, seconds since the epoch; the server closes the connection with 4001 then. */
    readonly exp: number,
  ) {
    super("authorized");
  }
}

/** Events a `RoomSubscription` dispatches, by type. */
export interface RoomSubscriptionEventMap<T, I = unknown> {
  /** A message of the room, once and in order. */
  message: RoomMessageEvent<T>;
  /** Who is in the room changed. */
  presence: RoomPresenceEvent<I>;
  /** Messages of the room that will never arrive. */
  lost: RoomLostEvent;
  /** The subscription changed state. */
  state: SubscriptionStateEvent;
  /** Something about the room went wrong without ending the subscription. */
  error: RoomErrorEvent;
  /** An event of the room's own application. */
  custom: RoomCustomEvent;
}

/** Events a `FanoutClient` dispatches, by type: the connection's, not any one room's. */
export interface FanoutClientEventMap {
  /** The connection changed state. */
  state: RoomStateEvent;
  /** Something that belongs to no room went wrong. */
  error: RoomErrorEvent;
  /** A token refresh took. */
  authorized: ConnectionAuthorizedEvent;
  /** An `x-` event that names no room. */
  custom: RoomCustomEvent;
}

/**
 * Raised by `FanoutClient.refreshToken` when the new token did not take:
 * the server refused it (its code), the token function failed ("token"),
 * the token has no place in an `auth` frame ("bad_request"), the connection
 * ended before the server answered or there was none ("unconfirmed"), or
 * the client is closed ("closed").
 *
 * @example
 * ```ts
 * try {
 *   await client.refreshToken();
 * } catch (error) {
 *   if (error instanceof TokenRefreshError && error.code === "unauthorized") showSignIn();
 * }
 * ```
 *
 * @see client-sdk/README.md#token-refresh-on-the-open-connection
 */
export class TokenRefreshError extends Error {
  constructor(
    /** Why the token did not take: the server's code, "token", "closed" or "unconfirmed". */
    readonly code: ErrorCode | "token" | "closed" | "unconfirmed",
    message: string,
  ) {
    super(message);
    this.name = "TokenRefreshError";
  }
}
