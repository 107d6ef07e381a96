/**
 * Small persistent values a room keeps beside its history: its epoch, its
 * counters, the directory of its leaves. One row each in a `meta` table,
 * created by the first write, so a room that is only looked at has no
 * storage.
 */
export class MetaStore {
  readonly #sql: SqlStorage;
  #exists: boolean;

  constructor(sql: SqlStorage) {
    this.#sql = sql;
    this.#exists = sql.exec<{ n: number }>(`SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'meta'`).one().n > 0;
  }

  /** Whether the table exists (the room has written something). */
  get exists(): boolean {
    return this.#exists;
  }

  get(key: string): string | null {
    if (!this.#exists) return null;
    const rows = this.#sql.exec<{ value: string }>(`SELECT value FROM meta WHERE key = ?`, key).toArray();
    return rows[0]?.value ?? null;
  }

  /**
   * Stores `value` under `key`; returns the rows written, as the storage
   * bills them. An upsert rewrites the row in place: `INSERT OR REPLACE`
   * deletes and inserts it, and so writes the key's index entry too, twice
   * the rows for the counters a busy room rewrites every few seconds.
   */
  set(key: string, value: string): number {
    if (!this.#exists) {
      this.#sql.exec(`CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)`);
      this.#exists = true;
    }
    const cursor = this.#sql.exec(`INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`, key, value);
    for (const _ of cursor) {
      // Drained: rowsWritten is final once the statement has run.
    }
    return cursor.rowsWritten;
  }

  delete(key: string): void {
    if (this.#exists) this.#sql.exec(`DELETE FROM meta WHERE key = ?`, key);
  }

  /** After the room gave its storage back (deleteAll). */
  reset(): void {
    this.#exists = false;
  }
}
