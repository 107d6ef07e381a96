import type { RoomCounterValues, RoomListEntry } from "../../protocol";
/**
 * One shard's share of the live-room registry, in the shard's SQLite storage.
 *
 * A row is a room's latest report: its connection and member counts, the room's clock at
 * the time of the report (to drop reports that arrive out of order), and the
 * shard's clock at which the entry stops counting as live. A room that left
 * (0 connections) keeps a row until then too, as a tombstone, so that a
 * delayed "1" sent before the "0" cannot resurrect it.
 *
 * Reads filter on `expires_at`, so an entry is unlisted the moment its TTL
 * passes; `sweep()` only reclaims the space. Rows written are what the
 * registry costs, so a heartbeat that changes nothing is written only when the
 * entry's remaining lifetime runs low (see `apply`). There is deliberately no index on
 * `expires_at`: it would add a row write to every report, while the sweep
 * reads each row once per TTL.
 */

/** What a room tells its shard. */
export interface RoomReport {
  room: string;
  /** Sockets the room holds; 0 means it just became empty. */
  connections: number;
  /** Members in the room's presence (absent: 0). */
  members?: number;
  /** The room's clock when it made the report, epoch ms. */
  at: number;
  /** Counters that grew since the room's last successful report (service-wide metrics). */
  delta?: RoomCounterValues | null;
  /**
   * From a room with no sockets that holds storage: when its shard should ask it
   * whether the storage can go (the directory's `due`, storage-sweep.ts).
   */
  due?: number;
}

/** A live room as the registry lists it (the `GET /rooms` entry of the protocol). */
export type RoomEntry = RoomListEntry;

export interface RegistryQuery {
  /** Only names starting with this ("" for all). */
  prefix: string;
  /** Only names sorting strictly after this (null: from the start). */
  after: string | null;
  limit: number;
}

export class Registry {
  readonly #sql: SqlStorage;

  constructor(sql: SqlStorage) {
    this.#sql = sql;
    sql.exec(
      `CREATE TABLE IF NOT EXISTS rooms (
        name TEXT PRIMARY KEY,
        connections INTEGER NOT NULL,
        reported_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        members INTEGER NOT NULL DEFAULT 0
      ) WITHOUT ROWID`,
    );
    // Registries created before member counts existed get the column (0 until the room's next report).
    try {
      sql.exec(`SELECT members FROM rooms LIMIT 0`);
    } catch {
      sql.exec(`ALTER TABLE rooms ADD COLUMN members INTEGER NOT NULL DEFAULT 0`);
    }
  }

  /**
   * Applies a report unless a newer one from the same room is already
   * stored. A report that changes nothing (same count) is only written when
   * the stored entry expires before `refreshBefore`, which spares a row write
   * on most heartbeats. Returns whether a row was written.
   */
  apply(report: RoomReport, expiresAt: number, refreshBefore: number): boolean {
    const cursor = this.#sql.exec(
      `INSERT INTO rooms (name, connections, members, reported_at, expires_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (name) DO UPDATE SET
         connections = excluded.connections, members = excluded.members,
         reported_at = excluded.reported_at, expires_at = excluded.expires_at
       WHERE excluded.reported_at >= rooms.reported_at
         AND (excluded.connections != rooms.connections OR excluded.members != rooms.members OR rooms.expires_at < ?)`,
      report.room,
      report.connections,
      report.members ?? 0,
      report.at,
      expiresAt,
      refreshBefore,
    );
    return cursor.rowsWritten > 0;
  }

  /** Live rooms matching `query`, in name order. */
  list(query: RegistryQuery, now: number): RoomEntry[] {
    const conditions = ["connections > 0", "expires_at > ?"];
    const params: (string | number)[] = [now];
    if (query.prefix !== "") {
      // A range on the primary key rather than LIKE: it uses the key order, and
      // LIKE patterns are capped at 50 bytes while names run to 64.
      conditions.push("name >= ?", "name < ?");
      params.push(query.prefix, prefixUpperBound(query.prefix));
    }
    if (query.after !== null) {
      conditions.push("name > ?");
      params.push(query.after);
    }
    params.push(query.limit);
    return this.#sql
      .exec<{ room: string; connections: number; members: number }>(
        `SELECT name AS room, connections, members FROM rooms WHERE ${conditions.join(" AND ")} ORDER BY name LIMIT ?`,
        ...params,
      )
      .toArray();
  }

  /** Which of `names` are live (a socket at their last report, and not expired): 99 names per read (100 bindings with the time). */
  liveAmong(names: readonly string[], now: number): Set<string> {
    const live = new Set<string>();
    for (let i = 0; i < names.length; i += 99) {
      const batch = names.slice(i, i + 99);
      const found = this.#sql.exec<{ name: string }>(
        `SELECT name FROM rooms WHERE name IN (${batch.map(() => "?").join(", ")}) AND connections > 0 AND expires_at > ?`,
        ...batch,
        now,
      );
      for (const row of found) live.add(row.name);
    }
    return live;
  }

  /** Live rooms and the sockets and members they last reported. */
  occupancy(now: number): { liveRooms: number; connections: number; members: number } {
    return this.#sql
      .exec<{ liveRooms: number; connections: number; members: number }>(
        `SELECT count(*) AS liveRooms, coalesce(sum(connections), 0) AS connections, coalesce(sum(members), 0) AS members
         FROM rooms WHERE connections > 0 AND expires_at > ?`,
        now,
      )
      .one();
  }

  /** Deletes entries (and tombstones) whose TTL has passed; returns how many rows remain. */
  sweep(now: number): number {
    this.#sql.exec(`DELETE FROM rooms WHERE expires_at <= ?`, now);
    return this.#sql.exec<{ n: number }>(`SELECT count(*) AS n FROM rooms`).one().n;
  }
}

/**
 * The smallest string greater than every string starting with `prefix`: the
 * prefix with its last character incremented. Room names are ASCII, so the
 * increment never leaves the 16-bit range.
 */
export function prefixUpperBound(prefix: string): string {
  const last = prefix.charCodeAt(prefix.length - 1);
  return prefix.slice(0, -1) + String.fromCharCode(last + 1);
}
