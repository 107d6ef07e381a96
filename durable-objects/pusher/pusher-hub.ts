import { FollowerObject } from "../leaf/follower-object";
import { PusherCore } from "./pusher-core";

/**
 * A hub of Pusher connections (`/app/{key}`, docs/pusher.md): stock Pusher
 * clients (pusher-js, Laravel Echo, the mobile libraries) connect here, and
 * each channel they subscribe to is a room, followed from its root as a hub
 * of multiplexed connections follows it (the same engine, rooms, presence and
 * windows), only spoken in Pusher. It answers pusher-js's exact ping without
 * waking, which is why Pusher connections have objects of their own: an object
 * has one such pair, and this service's own is `ping`. Its name is
 * `pusher-<n>`; it stores only channel lists that outgrow a socket's attachment.
 *
 * Its face is every follower's (leaf/follower-object.ts); pusher-core.ts wires its parts.
 *
 * @example
 * ```ts
 * // Exported from the worker and bound as PUSHER_HUBS in wrangler.toml; without it, the Pusher front door is off.
 * export { PusherHub } from "edge-fanout";
 * ```
 *
 * @see docs/pusher.md#turn-it-on
 */
export class PusherHub extends FollowerObject<PusherCore> {
  constructor(ctx: DurableObjectState, env: Record<string, unknown>) {
    super(ctx, env, new PusherCore(ctx, env), "Pusher hub");
  }

  /** Closes every connection signed in as `user` (the HTTP API's `terminate_connections`); returns how many. */
  async terminate(user: string): Promise<number> {
    if (this.core.nameless) return 0;
    return this.core.terminate(user);
  }
}
