import { app } from "./app";

export { Room } from "../durable-objects/room/room";
export { Coordinator } from "../durable-objects/coordinator/coordinator";
export { RoomLeaf } from "../durable-objects/leaf/leaf";

export default app;
