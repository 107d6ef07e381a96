import type { RoomStats, RootRequests } from "../../protocol";
import { addCounters } from "../../common/counters";
import { followerAt } from "../../common/followers";
import type { Limits } from "../../common/settings";
import type { Retention } from "../../common/retention";
import type { RoomCounters } from "../engine/counters";
import type { SocketEngine } from "../engine/socket-engine";
import type { Stream } from "../engine/stream";
import type { FollowersSnapshot } from "../followers/followers";
import type { RoomHistory } from "./storage/room-history";

/** The parts of a room its own figures come from. */
export interface StatsParts {
  room: string;
  history: RoomHistory;
  engine: SocketEngine;
  stream: Stream;
  retention: Retention;
  counters: RoomCounters;
  limits: Pick<Limits, "WINDOW_BYTES">;
}

/** `GET /rooms/{room}` as the root's own object sees it: its sockets, history and counters. */
export function ownStats({ room, history, engine, stream, retention, counters, limits }: StatsParts, instanceStartedAt: number): RoomStats {
  const window = engine.delivery.windowFigures();
  return {
    room,
    epoch: history.epoch,
    connections: engine.size,
    members: engine.presence(stream).count,
    seq: history.seq,
    historyOldest: history.oldest(),
    retention: { ...retention },
    behind: engine.delivery.behind,
    ...counters.snapshot(),
    windowBytesInFlight: window.inFlight,
    windowBytesMax: window.max,
    windowCap: limits.WINDOW_BYTES,
    instanceStartedAt,
  };
}

/**
 * `GET /rooms/{room}` of a sharded room (or one that hubs follow): the root's
 * own figures, summed with every leaf's and hub's as asked now (counts a
 * follower has not reported yet are the room's too), with each one's line
 * beside them.
 */
export function roomStats(own: RoomStats, { leaves }: FollowersSnapshot, requests: RootRequests, pushes: number): RoomStats {
  const stats: RoomStats = { ...own, refusals: { ...own.refusals }, rootConnections: own.connections };
  for (const leaf of leaves) {
    if (leaf.unreported) addCounters(stats, leaf.unreported);
    stats.connections += leaf.connections;
    stats.behind += leaf.behind;
    stats.windowBytesInFlight += leaf.windowBytesInFlight;
    stats.windowBytesMax = Math.max(stats.windowBytesMax, leaf.windowBytesMax);
  }
  let multiplexed = 0;
  let pusher = 0;
  stats.leaves = leaves.map(({ unreported: _, ...leaf }) => {
    const follower = followerAt(leaf.index);
    if (follower.kind === "hub") {
      multiplexed += leaf.connections;
      return { ...leaf, hub: follower.n };
    }
    if (follower.kind === "pusher") {
      pusher += leaf.connections;
      return { ...leaf, pusherHub: follower.n };
    }
    return leaf;
  });
  if (multiplexed > 0) stats.multiplexed = multiplexed;
  if (pusher > 0) stats.pusher = pusher;
  stats.rootRequests = requests;
  stats.leafPushes = pushes;
  return stats;
}
