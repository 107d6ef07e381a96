import type { Coordinator } from "../durable-objects/coordinator/coordinator";
import type { RoomHub } from "../durable-objects/hub/hub";
import type { PusherHub } from "../durable-objects/pusher/pusher-hub";
import type { RoomLeaf } from "../durable-objects/leaf/leaf";
import type { Room } from "../durable-objects/room/room";

/**
 * Bindings and vars the worker and its objects receive (see wrangler.toml).
 *
 * @see docs/library.md#bindings
 * @see docs/configuration.md
 */
export interface Env {
  /** The rooms, named by room: the `Room` class or your subclass of it, with SQLite storage. */
  ROOMS: DurableObjectNamespace<Room>;
  /** The live-room registry and broadcast shards, named `shard-<i>`: the `Coordinator` class, with SQLite storage. */
  COORDINATOR: DurableObjectNamespace<Coordinator>;
  /** Leaf objects of sharded rooms (docs/sharded-rooms.md), named `<room>/<index>`. */
  LEAVES: DurableObjectNamespace<RoomLeaf>;
  /** Hubs of multiplexed connections (docs/multiplexing.md), named `hub-<n>`; without it, `GET /ws` answers 404. */
  HUBS?: DurableObjectNamespace<RoomHub>;
  /** Hubs of Pusher connections (docs/pusher.md), named `pusher-<n>`; without it, the Pusher front door is off. */
  PUSHER_HUBS?: DurableObjectNamespace<PusherHub>;
  /** Every limit var is optional; absent ones take their defaults (DEFAULTS in common/settings.ts). */
  [name: string]: unknown;
  /** Set only by the local server launcher: enables the loopback admin routes under /__local. */
  LOCAL_ADMIN_TOKEN?: string;
}

export type CoordinatorNamespace = Env["COORDINATOR"];
