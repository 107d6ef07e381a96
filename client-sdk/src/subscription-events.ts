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

/** A subscription changed state, for the reason `cause` names. */
export class SubscriptionStateEvent extends RoomEvent {
  constructor(
    readonly state: SubscriptionState,
    readonly previous: SubscriptionState,
    readonly cause: SubscriptionCause,
    /** The server's error code, when the server refused or ended the subscription. */
    readonly code?: ErrorCode,
    /** The server's words for it. */
    readonly reason?: string,
  ) {
    super("state");
  }
}

/** The shared connection took a fresh token without reconnecting. */
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
  message: RoomMessageEvent<T>;
  presence: RoomPresenceEvent<I>;
  lost: RoomLostEvent;
  state: SubscriptionStateEvent;
  error: RoomErrorEvent;
  custom: RoomCustomEvent;
}

/** Events a `FanoutClient` dispatches, by type: the connection's, not any one room's. */
export interface FanoutClientEventMap {
  state: RoomStateEvent;
  error: RoomErrorEvent;
  authorized: ConnectionAuthorizedEvent;
  custom: RoomCustomEvent;
}

/**
 * Raised by `FanoutClient.refreshToken` when the new token did not take:
 * the server refused it (its code), the token function failed ("token"),
 * the token has no place in an `auth` frame ("bad_request"), the connection
 * ended before the server answered or there was none ("unconfirmed"), or
 * the client is closed ("closed").
 */
export class TokenRefreshError extends Error {
  constructor(
    readonly code: ErrorCode | "token" | "closed" | "unconfirmed",
    message: string,
  ) {
    super(message);
    this.name = "TokenRefreshError";
  }
}
