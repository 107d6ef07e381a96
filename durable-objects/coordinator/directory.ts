/**
 * One shard's share of the directory of rooms that hold storage: a room is
 * added when it first writes and removed when it gives its storage back. The
 * worker asks here before it looks at a room, because instantiating a room
 * object that never existed creates its (empty) database: looking must create
 * nothing.
 *
 * Each row also says when to ask the room next whether its storage can go
 * (`due`): the shard asks by name (storage-sweep.ts), so a room gives its
 * storage back from a call that names it, never from an alarm of its own
 * (which the runtime may start without its name). The index on `due` makes
 * the sweep read only the rooms it asks; it costs a row on each insert, move
 * and delete.
 */
export class Directory {
  readonly #sql: SqlStorage;

  constructor(sql: SqlStorage) {
    this.#sql = sql;
    sql.exec(`CREATE TABLE IF NOT EXISTS stored_rooms (name TEXT PRIMARY KEY, due INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID`);
    // Directories from before rooms were asked get the column: 0, so each of their rooms is asked at the next sweep.
    try {
      sql.exec(`SELECT due FROM stored_rooms LIMIT 0`);
    } catch {
      sql.exec(`ALTER TABLE stored_rooms ADD COLUMN due INTEGER NOT NULL DEFAULT 0`);
    }
    sql.exec(`CREATE INDEX IF NOT EXISTS stored_rooms_due ON stored_rooms (due)`);
  }

  /** Records that `room` holds storage, to be asked at `due`; a room already listed keeps its row (nothing written). */
  add(room: string, due: number): void {
    this.#sql.exec(`INSERT OR IGNORE INTO stored_rooms (name, due) VALUES (?, ?)`, room, due);
  }

  /** The room gave its storage back. */
  remove(room: string): void {
    this.#sql.exec(`DELETE FROM stored_rooms WHERE name = ?`, room);
  }

  /** Moves a listed room's next question to `due`; writes only when it changes. */
  setDue(room: string, due: number): void {
    this.#sql.exec(`UPDATE stored_rooms SET due = ? WHERE name = ? AND due != ?`, due, room, due);
  }

  /**
   * Moves a listed room's next question to `due` when that is more than
   * `slackMs` away from the one it has: a question a second late or early
   * costs less than the two rows of a move, one asked much too early costs a
   * call into the room and the same move after its answer.
   */
  moveDue(room: string, due: number, slackMs: number): void {
    this.#sql.exec(`UPDATE stored_rooms SET due = ? WHERE name = ? AND abs(due - ?) > ?`, due, room, due, slackMs);
  }

  has(room: string): boolean {
    return this.#sql.exec(`SELECT 1 FROM stored_rooms WHERE name = ?`, room).toArray().length > 0;
  }

  /** Up to `limit` rooms to ask by `now`, the longest waiting first. */
  due(now: number, limit: number): string[] {
    return this.#sql
      .exec<{ name: string }>(`SELECT name FROM stored_rooms WHERE due <= ? ORDER BY due LIMIT ?`, now, limit)
      .toArray()
      .map((r) => r.name);
  }

  /** When the next room is to be asked (null: the shard lists none). */
  nextDue(): number | null {
    return this.#sql.exec<{ due: number | null }>(`SELECT min(due) AS due FROM stored_rooms`).one().due;
  }
}
