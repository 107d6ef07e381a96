/**
 * The service as deployed from this repository (wrangler.toml): the fan-out
 * app at the root of its own worker, with the plain `Room`. A worker of your
 * own imports the same pieces from the package instead (worker/lib.ts).
 */
import { createFanoutApp } from "./app";

export { Room } from "../durable-objects/room/room";
export { Coordinator } from "../durable-objects/coordinator/coordinator";
export { RoomLeaf } from "../durable-objects/leaf/leaf";
export { RoomHub } from "../durable-objects/hub/hub";
export { PusherHub } from "../durable-objects/pusher/pusher-hub";

export default createFanoutApp();
