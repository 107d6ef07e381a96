import type { RoomStats, RootRequests } from "../../protocol";
import { addCounters } from "../../common/counters";
import type { LeavesSnapshot } from "./leaves";

/**
 * `GET /rooms/{room}` of a sharded room: the root's own figures, summed with
 * every leaf's as asked now (counts a leaf has not reported yet are the
 * room's too), with each leaf's line beside them.
 */
export function roomStats(own: RoomStats, { leaves }: LeavesSnapshot, requests: RootRequests, pushes: number): RoomStats {
  const stats: RoomStats = { ...own, refusals: { ...own.refusals }, rootConnections: own.connections };
  for (const leaf of leaves) {
    if (leaf.unreported) addCounters(stats, leaf.unreported);
    stats.connections += leaf.connections;
    stats.behind += leaf.behind;
    stats.windowBytesInFlight += leaf.windowBytesInFlight;
    stats.windowBytesMax = Math.max(stats.windowBytesMax, leaf.windowBytesMax);
  }
  stats.leaves = leaves.map(({ unreported: _, ...leaf }) => leaf);
  stats.rootRequests = requests;
  stats.leafPushes = pushes;
  return stats;
}
