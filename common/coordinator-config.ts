/**
 * The coordinator's settings, derived from the limits, as the rooms (their
 * reports), the worker (listing, broadcasting) and the shards read them.
 */
import { readLimits } from "./settings";

export { MAX_BROADCAST_ROOMS, MAX_SHARDS } from "./settings";

/**
 * Registry entries live for this many heartbeat intervals without a refresh.
 * With REFRESH_BELOW_HEARTBEATS below, a steady room's entry is rewritten on
 * every other heartbeat, and one lost heartbeat never unlists a live room.
 */
export const TTL_HEARTBEATS = 4;
/**
 * A heartbeat that changes nothing is only written when the entry has less
 * than this many intervals left: rows written are the registry's main cost.
 */
export const REFRESH_BELOW_HEARTBEATS = 2.5;

/**
 * Registry rooms one shard invocation delivers a broadcast to (`deliverPage`).
 * With the shard's attempts per room it bounds the subrequests of one
 * invocation (1,000 x 3 = 3,000, under the 10,000 limit), whatever the shard
 * holds; the worker pages on.
 */
export const FANOUT_PAGE_ROOMS = 1000;

export interface CoordinatorConfig {
  shards: number;
  broadcastMaxRooms: number;
  /** How often a live room re-reports itself: its sweep alarm interval. */
  heartbeatMs: number;
  /** A registry entry not refreshed for this long is no longer listed. */
  ttlMs: number;
  /** An unchanged report is stored only when the entry has less than this long to live. */
  refreshBelowMs: number;
  /** Largest broadcast `data`, serialized, bytes (the publish limit). */
  maxMessageBytes: number;
  /** Rooms without sockets one shard's broadcasts reach per second (its share of the service's pace; 0 = unpaced). */
  idleRoomsPerShardPerSecond: number;
}

/** Entry lifetime when rooms do not heartbeat (IDLE_TIMEOUT_SECONDS = 0): a century. */
const NEVER_EXPIRES_MS = 100 * 365 * 86_400_000;

/**
 * The coordinator's settings, derived from the limits (read once per
 * environment by the settings reader; this only does arithmetic).
 */
export function readCoordinatorConfig(env: Record<string, unknown>): CoordinatorConfig {
  const limits = readLimits(env);
  // A room sweeps (and so heartbeats) every IDLE_TIMEOUT_SECONDS; 0 disables the sweep,
  // and then only edge reports keep entries fresh, so entries must not expire on their own.
  const heartbeatMs = limits.IDLE_TIMEOUT_SECONDS * 1000;
  return {
    shards: limits.COORDINATOR_SHARDS,
    broadcastMaxRooms: limits.BROADCAST_MAX_ROOMS,
    heartbeatMs,
    ttlMs: heartbeatMs > 0 ? heartbeatMs * TTL_HEARTBEATS : NEVER_EXPIRES_MS,
    refreshBelowMs: heartbeatMs > 0 ? heartbeatMs * REFRESH_BELOW_HEARTBEATS : NEVER_EXPIRES_MS / 2,
    maxMessageBytes: limits.MAX_MESSAGE_BYTES,
    idleRoomsPerShardPerSecond: limits.BROADCAST_IDLE_ROOMS_PER_SECOND / limits.COORDINATOR_SHARDS,
  };
}
