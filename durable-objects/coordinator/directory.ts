/**
 * One shard's share of the directory of rooms that hold storage: a room is
 * added when it first writes and removed when it gives its storage back. The
 * worker asks here before it looks at a room, because instantiating a room
 * object that never existed creates its (empty) database: looking must create
 * nothing. Two rows written per room lifetime.
 */
export class Directory {
  readonly #sql: SqlStorage;

  constructor(sql: SqlStorage) {
    this.#sql = sql;
    sql.exec(`CREATE TABLE IF NOT EXISTS stored_rooms (name TEXT PRIMARY KEY) WITHOUT ROWID`);
  }

  /** Records that `room` holds storage (true) or gave it back (false). Writes only on a change. */
  set(room: string, stored: boolean): void {
    if (stored) this.#sql.exec(`INSERT OR IGNORE INTO stored_rooms (name) VALUES (?)`, room);
    else this.#sql.exec(`DELETE FROM stored_rooms WHERE name = ?`, room);
  }

  has(room: string): boolean {
    return this.#sql.exec(`SELECT 1 FROM stored_rooms WHERE name = ?`, room).toArray().length > 0;
  }
}
