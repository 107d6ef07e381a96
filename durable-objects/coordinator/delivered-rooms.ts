/**
 * The rooms a shard knows hold a broadcast, by its idempotency key: rooms
 * that answered (delivered, or a duplicate), recorded once per delivery call,
 * so that a retry of the broadcast with the same key counts them at once
 * instead of waking each again. Nothing depends on it for correctness (every
 * room dedupes the key itself for a day); it makes a retry cost what is left
 * to do.
 *
 * One row per delivery call (at most a page of rooms, newline-separated:
 * room names have no newline), in the shard's SQLite: a broadcast to 10,000
 * rooms over 16 shards writes about 16 rows here, beside the 10,000 rooms'
 * own. Rows are kept as long as the rooms keep the key (KEY_MIN_AGE_MS), and
 * swept from the shard's alarm.
 */
import { KEY_MIN_AGE_MS } from "../room/storage/idempotency-keys";

export class DeliveredRooms {
  readonly #sql: SqlStorage;
  /** Parts written by this instance, so that two calls for one key in the same millisecond keep their rows apart. */
  #parts = 0;

  constructor(sql: SqlStorage) {
    this.#sql = sql;
    sql.exec(
      `CREATE TABLE IF NOT EXISTS broadcast_rooms (
        key TEXT NOT NULL,
        part INTEGER NOT NULL,
        at INTEGER NOT NULL,
        rooms TEXT NOT NULL,
        PRIMARY KEY (key, part)
      ) WITHOUT ROWID`,
    );
  }

  /** The rooms known to hold the broadcast of `key`. */
  of(key: string, now: number): Set<string> {
    const rooms = new Set<string>();
    for (const row of this.#sql.exec<{ rooms: string }>(`SELECT rooms FROM broadcast_rooms WHERE key = ? AND at > ?`, key, now - KEY_MIN_AGE_MS)) {
      for (const room of row.rooms.split("\n")) rooms.add(room);
    }
    return rooms;
  }

  /** `rooms` answered that they hold the broadcast of `key`. */
  record(key: string, rooms: readonly string[], now: number): void {
    if (rooms.length === 0) return;
    this.#parts = (this.#parts + 1) % 1000;
    this.#sql.exec(`INSERT OR REPLACE INTO broadcast_rooms (key, part, at, rooms) VALUES (?, ?, ?, ?)`, key, now * 1000 + this.#parts, now, rooms.join("\n"));
  }

  /** Deletes what the rooms no longer remember either; returns how many rows remain. */
  sweep(now: number): number {
    this.#sql.exec(`DELETE FROM broadcast_rooms WHERE at <= ?`, now - KEY_MIN_AGE_MS);
    return this.#sql.exec<{ n: number }>(`SELECT count(*) AS n FROM broadcast_rooms`).one().n;
  }
}
