/**
 * edge-fanout as a library: real-time fan-out added to a worker of your own.
 *
 * - `createFanoutApp()` makes the service's HTTP front (a Hono app) to mount
 *   on a path of your worker;
 * - `Room` is the room object; subclass it and override its hooks
 *   (`onConnect`, `beforePublish`, `onClientFrame`, `onClose`) to add your own
 *   logic, then bind your subclass as `ROOMS`;
 * - `Coordinator` is the live-room registry and broadcast object: re-export
 *   it from your worker and bind it as `COORDINATOR`;
 * - `RoomHub` holds multiplexed connections (`GET /ws`): re-export it and
 *   bind it as `HUBS`, or that route answers 404 (docs/multiplexing.md);
 * - `RoomLeaf` holds sockets of rooms past ROOM_SHARD_SOCKETS: bind it as
 *   `LEAVES` to let rooms grow past one object (docs/sharded-rooms.md). A
 *   room whose class overrides onConnect, onClientFrame or onClose keeps all
 *   its sockets in its own object, so it does not need it.
 *
 * docs/library.md ("Add fan-out to your own worker") and docs/hooks.md show
 * the whole setup; examples/chat is a complete worker that uses it.
 *
 * @example
 * import { Hono } from "hono";
 * import { createFanoutApp, Room, type PublishRequest } from "edge-fanout";
 * export { Coordinator, RoomHub } from "edge-fanout";
 *
 * export class ChatRoom extends Room {
 *   protected override beforePublish({ data }: PublishRequest) {
 *     if (typeof data !== "string") return { refuse: "a chat message is a string" };
 *   }
 * }
 * const app = new Hono();
 * app.route("/realtime", createFanoutApp());
 * export default app;
 */
export { createFanoutApp, type FanoutAppOptions, type FanoutAppEnv } from "./app";
export type { Env as FanoutEnv } from "./env";
export { Room, type PublishOptions, type PublishOutcome, type PublishRefused, type PublishResult } from "../durable-objects/room/room";
export { Coordinator } from "../durable-objects/coordinator/coordinator";
export { RoomLeaf } from "../durable-objects/leaf/leaf";
export { RoomHub } from "../durable-objects/hub/hub";
export { PusherHub } from "../durable-objects/pusher/pusher-hub";
export type {
  CloseInfo,
  Connection,
  ConnectAccept,
  ConnectDecision,
  ConnectRefusal,
  ConnectRefusalCode,
  ConnectRequest,
  HookCloseCode,
  JsonObject,
  JsonValue,
  MemberView,
  PublishDecision,
  PublishRefusal,
  PublishRefusalCode,
  PublishRequest,
  PublishSource,
  PublishTransform,
} from "../durable-objects/room/hooks";
export { MAX_CONNECTION_DATA_BYTES, MAX_FRAMES_AWAITING_HOOKS } from "../common/settings";
export { mintToken, verifyToken, type SubscribeClaims, type TokenRequest } from "../common/tokens";
export {
  CloseCode,
  CUSTOM_TYPE_PATTERN,
  isCustomType,
  type CustomClientFrame,
  type CustomServerEvent,
  type CustomType,
  type ErrorBody,
  type ErrorCode,
  WEBHOOK_EVENT_TYPES,
  WEBHOOK_SIGNATURE_HEADER,
  type WebhookBody,
  type WebhookEvent,
  type WebhookEventType,
} from "../protocol";
