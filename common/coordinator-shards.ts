/**
 * How the coordinator is addressed: a room's registry entry lives in shard
 * hash(name) mod COORDINATOR_SHARDS, and shard i is the object named
 * `shard-<i>`. Rooms (reporting), the worker (listing, broadcasting) and the
 * shards themselves agree on this and nothing else.
 */

/**
 * FNV-1a (32 bit) over the name's UTF-16 code units. Room names are ASCII, so
 * this equals hashing their bytes; it only has to be stable and spread evenly.
 */
export function hashRoomName(name: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < name.length; i++) {
    hash ^= name.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
}

/** The shard index a room's registry entry lives in. */
export function shardOf(room: string, shards: number): number {
  return hashRoomName(room) % shards;
}

/** Durable Object name of shard `index`. */
export function shardName(index: number): string {
  return `shard-${index}`;
}

/** What shardStub needs of a Durable Object namespace (the COORDINATOR binding). */
export interface NamedObjects<Id, Stub> {
  idFromName(name: string): Id;
  get(id: Id): Stub;
}

/** The stub of shard `index` in `namespace` (the COORDINATOR binding). */
export function shardStub<Id, Stub>(namespace: NamedObjects<Id, Stub>, index: number): Stub {
  return namespace.get(namespace.idFromName(shardName(index)));
}

/** Groups room names by shard index. */
export function groupByShard(rooms: readonly string[], shards: number): Map<number, string[]> {
  const groups = new Map<number, string[]>();
  for (const room of rooms) {
    const index = shardOf(room, shards);
    const group = groups.get(index);
    if (group) group.push(room);
    else groups.set(index, [room]);
  }
  return groups;
}
