import type { RoomList } from "../../protocol";
import { forEachBounded } from "../../common/bounded";
import type { CoordinatorConfig } from "../../common/coordinator-config";
import { SHARD_CONCURRENCY } from "./policy";
import type { RegistryQuery, RoomEntry } from "../../durable-objects/coordinator/registry";
import { encodeCursor } from "./requests";
import { shardStub } from "../../common/coordinator-shards";
import type { CoordinatorNamespace } from "../env";

/**
 * One page of the registry across every shard: each shard answers its first
 * `limit + 1` live rooms after the cursor, and the merge keeps the first
 * `limit` in name order. Asking for one more than the page says whether
 * another page exists without a second round. A shard that fails fails the
 * page (a page missing a shard would skip its rooms for good once the cursor
 * moved past them).
 */
export async function listRooms(namespace: CoordinatorNamespace, config: CoordinatorConfig, query: RegistryQuery): Promise<RoomList> {
  const perShard: RoomEntry[][] = [];
  const shards = Array.from({ length: config.shards }, (_, i) => i);
  await forEachBounded(shards, SHARD_CONCURRENCY, async (index) => {
    perShard[index] = await shardStub(namespace, index).list({ ...query, limit: query.limit + 1 });
  });
  // A room appears twice only while COORDINATOR_SHARDS changes (an old shard's entry has not expired yet).
  const byName = new Map<string, RoomEntry>();
  for (const entries of perShard) for (const entry of entries ?? []) if (!byName.has(entry.room)) byName.set(entry.room, entry);
  const merged = [...byName.values()].sort((a, b) => (a.room < b.room ? -1 : a.room > b.room ? 1 : 0));
  const rooms = merged.slice(0, query.limit);
  const last = rooms[rooms.length - 1];
  return { rooms, cursor: merged.length > query.limit && last ? encodeCursor(last.room) : null };
}
