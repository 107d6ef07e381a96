import type { RoomCounterValues } from "../../protocol";
import { followerIndex } from "../../common/followers";

/**
 * One shard's record of the hubs of multiplexed connections whose number maps
 * to it (hub n reports to shard n mod COORDINATOR_SHARDS), for GET /metrics:
 * how many connections each holds and how many room subscriptions they have.
 * The rooms count those subscriptions among their connections already; this
 * is the other view, connections as sockets.
 *
 * Like a room's entry, a hub's row counts until its TTL passes, and a report
 * older than the stored one is ignored.
 */

/** What a hub tells its shard: on its first connection and its last, and from its periodic sweep. */
export interface HubReport {
  /** The hub's index among followers (common/followers.ts): its kind and number. */
  hub: number;
  /** Multiplexed connections the hub holds. */
  connections: number;
  /** Room subscriptions over those connections. */
  subscriptions: number;
  /** Rooms the hub follows for them. */
  rooms: number;
  /** The hub's clock when it made the report, epoch ms. */
  at: number;
  /** Counters that grew at the hub since its last successful report (refused subscribes and frames; a slow connection's kick counts for the room it stalled in, reported by the hub to that room). */
  delta?: RoomCounterValues | null;
}

/** The multiplexed part of a shard's GET /metrics (or the Pusher part: the same figures of Pusher hubs). */
export interface HubOccupancy {
  hubs: number;
  connections: number;
  subscriptions: number;
}

export class HubRegistry {
  readonly #sql: SqlStorage;

  constructor(sql: SqlStorage) {
    this.#sql = sql;
    sql.exec(
      `CREATE TABLE IF NOT EXISTS hubs (
        hub INTEGER PRIMARY KEY,
        connections INTEGER NOT NULL,
        subscriptions INTEGER NOT NULL,
        rooms INTEGER NOT NULL,
        reported_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL
      )`,
    );
  }

  /** Stores `report` unless a later one is stored already. */
  apply(report: HubReport, expiresAt: number): void {
    this.#sql.exec(
      `INSERT INTO hubs (hub, connections, subscriptions, rooms, reported_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT (hub) DO UPDATE SET
         connections = excluded.connections, subscriptions = excluded.subscriptions, rooms = excluded.rooms,
         reported_at = excluded.reported_at, expires_at = excluded.expires_at
       WHERE excluded.reported_at >= hubs.reported_at`,
      report.hub,
      report.connections,
      report.subscriptions,
      report.rooms,
      report.at,
      expiresAt,
    );
  }

  /** Hubs of `kind` with connections, and what they hold, as last reported. */
  occupancy(now: number, kind: "hub" | "pusher" = "hub"): HubOccupancy {
    const pusherBase = followerIndex("pusher", 0);
    return this.#sql
      .exec<{ hubs: number; connections: number; subscriptions: number }>(
        `SELECT count(*) AS hubs, coalesce(sum(connections), 0) AS connections, coalesce(sum(subscriptions), 0) AS subscriptions
         FROM hubs WHERE connections > 0 AND expires_at > ? AND ${kind === "pusher" ? "hub >= ?" : "hub < ?"}`,
        now,
        pusherBase,
      )
      .one();
  }

  /** Deletes rows whose TTL has passed; returns how many remain. */
  sweep(now: number): number {
    this.#sql.exec(`DELETE FROM hubs WHERE expires_at <= ?`, now);
    return this.#sql.exec<{ n: number }>(`SELECT count(*) AS n FROM hubs`).one().n;
  }
}
