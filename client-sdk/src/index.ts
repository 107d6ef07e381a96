/**
 * Client for the real-time fan-out service: open a room, receive its messages
 * once and in order across disconnects, publish into it; or follow many rooms
 * over one connection (FanoutClient).
 *
 * @see client-sdk/README.md
 */
export { RoomClient, DEFAULT_ACK_DELAY_MS, type RoomClientOptions } from "./client.js";
export { FanoutClient, DEFAULT_REFRESH_BEFORE_EXPIRY_MS, type ConnectionLimits, type FanoutClientOptions } from "./fanout-client.js";
export { RoomSubscription, type RoomSubscriptionOptions } from "./room-subscription.js";
export {
  ConnectionAuthorizedEvent,
  SubscriptionStateEvent,
  TokenRefreshError,
  type FanoutClientEventMap,
  type RoomSubscriptionEventMap,
  type SubscriptionCause,
  type SubscriptionState,
} from "./subscription-events.js";
export type { WebSocketLike, WebSocketConstructor } from "./transport.js";
export {
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
export type { RoomMember, RoomPresence } from "./presence.js";
export type { RoomEventBase, RoomListener, RoomListenerOptions, TypedEventTarget } from "./typed-target.js";
export { backoffDelay, backoffCeiling, DEFAULT_BACKOFF, type BackoffOptions } from "./backoff.js";
export { multiplexSocketUrl, roomSocketUrl, type RoomAddress, type ServiceAddress, type TokenIn, type TokenSource } from "./url.js";
export { CloseCode, CLOSE_CODES, shouldReconnect, PROTOCOL_VERSION, isCustomType, MULTIPLEX_PATH } from "../../protocol/index.js";
export type { CustomClientFrame, CustomServerEvent, CustomType } from "../../protocol/index.js";
