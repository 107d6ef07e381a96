import type { RoomCounterValues } from "../../protocol";
import type { PublishOutcome } from "../engine/publish-outcome";

/** What a room answers its coordinator shard when the shard asks whether its storage can go (`giveBack`). */
export type GiveBackAnswer =
  /** The storage is gone; `delta`: counters the room had not reported yet, for the service's totals. */
  | { gone: true; delta: RoomCounterValues | null }
  /** Not yet: ask again at `due`, or (null) once the room has said when (it has sockets, or webhook events wait). */
  | { gone: false; due: number | null };

/**
 * What a coordinator shard calls on a room (room.ts implements it): a
 * broadcast's publish into it, and the question of its storage. The shard
 * types the ROOMS binding by this contract, not by the room's class.
 */
export interface RoomRpc {
  publish(dataJson: string, options: { idempotencyKey?: string; source: "broadcast" }): Promise<PublishOutcome>;
  giveBack(): Promise<GiveBackAnswer>;
}

type RoomObject = Rpc.DurableObjectBranded & RoomRpc;

/** The room named `room` (the ROOMS binding), as a coordinator shard calls it. */
export function roomOf(env: Record<string, unknown>, room: string): RoomRpc {
  const namespace = env.ROOMS as DurableObjectNamespace<RoomObject> | undefined;
  if (typeof namespace?.idFromName !== "function") throw new Error("no ROOMS binding");
  return namespace.get(namespace.idFromName(room));
}
