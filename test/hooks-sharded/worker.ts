/**
 * A worker whose rooms may shard: CheckedRoom overrides beforePublish only,
 * so its sockets spread over leaves past ROOM_SHARD_SOCKETS and hubs of
 * multiplexed connections may follow it, and every publish, from a socket on
 * any object, passes the root's hook. ListedRoom
 * (onConnect) shows that a room with connection hooks keeps its sockets.
 * Run by test/service/hooks-sharded.test.ts on the local server.
 */
import { Hono } from "hono";
import { createFanoutApp, Room, type ConnectRequest, type FanoutEnv, type PublishDecision, type PublishRequest } from "../../worker/lib";

export { Coordinator, RoomHub, RoomLeaf } from "../../worker/lib";

export class CheckedRoom extends Room<FanoutEnv> {
  protected override beforePublish({ data, source }: PublishRequest): PublishDecision {
    if (typeof data === "object" && data !== null && "refuse" in data) return { refuse: "refused by the room's rule", code: "forbidden" };
    return { data: { data, source: source.kind } };
  }
}

export class ListedRoom extends Room<FanoutEnv> {
  protected override onConnect(request: ConnectRequest): undefined {
    void request;
    return undefined;
  }
}

const checked = createFanoutApp({ sdk: false, demo: false });
const app = new Hono<{ Bindings: FanoutEnv & { LISTED_ROOMS: FanoutEnv["ROOMS"] } }>();
app.get("/", (c) => c.text("sharded hooks"));
// The same app over the other room class, under /listed: the ROOMS binding decides the class.
// Hubs follow the rooms of the worker's own ROOMS binding, so this route has none (GET /listed/ws: 404).
app.all("/listed/*", (c) => {
  const url = new URL(c.req.url);
  url.pathname = url.pathname.slice("/listed".length);
  return checked.fetch(new Request(url, c.req.raw), { ...c.env, ROOMS: c.env.LISTED_ROOMS, HUBS: undefined }, c.executionCtx);
});
app.route("/", checked);

export default app;
