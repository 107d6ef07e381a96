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

  set(key: string, value: string): void {
    if (!this.#exists) {
      this.#sql.exec(`CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)`);
      this.#exists = true;
    }
    this.#sql.exec(`INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)`, key, value);
  }

  delete(key: string): void {
    if (this.#exists) this.#sql.exec(`DELETE FROM meta WHERE key = ?`, key);
  }

  /** After the room gave its storage back (deleteAll). */
  reset(): void {
    this.#exists = false;
  }
}
