/**
 * Client for the real-time fan-out service: open a room, receive its messages
 * once and in order across disconnects, publish into it.
 */
export { RoomClient, type RoomClientOptions, type WebSocketLike, type WebSocketConstructor } from "./client.js";
export {
  PublishError,
  RoomErrorEvent,
  RoomLostEvent,
  RoomMessageEvent,
  RoomStateEvent,
  type ConnectionState,
  type RoomClientEventMap,
} from "./events.js";
export { backoffDelay, backoffCeiling, DEFAULT_BACKOFF, type BackoffOptions } from "./backoff.js";
export { roomSocketUrl, type RoomAddress } from "./url.js";
export { CloseCode, CLOSE_CODES, shouldReconnect, PROTOCOL_VERSION } from "./protocol.js";
