import { FollowerObject } from "../leaf/follower-object";
import { HubCore } from "./hub-core";

/**
 * A hub of multiplexed connections (`GET /ws`, docs/multiplexing.md): it
 * holds connections that each follow many rooms, and follows each of those
 * rooms from its root as a leaf of a sharded room does, so a room's flush is
 * one push per hub however many of the hub's connections follow it, and the
 * room's leaves and hubs are one set of followers. It runs the same socket
 * engine as a room; every event names its room, and one window covers a
 * connection across its rooms. Its name is `hub-<n>`; it stores nothing.
 *
 * Its face is every follower's (leaf/follower-object.ts); hub-core.ts wires its parts.
 *
 * @example
 * ```ts
 * // Exported from the worker and bound as HUBS in wrangler.toml; without it, `GET /ws` answers 404.
 * export { RoomHub } from "edge-fanout";
 * ```
 *
 * @see docs/multiplexing.md
 */
export class RoomHub extends FollowerObject<HubCore> {
  constructor(ctx: DurableObjectState, env: Record<string, unknown>) {
    super(ctx, env, new HubCore(ctx, env), "hub");
  }
}
