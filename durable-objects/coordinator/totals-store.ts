import { addTotals, zeroTotals, type ServiceTotals } from "../../common/counters";

/**
 * A shard's running sums of what its rooms (and, on shard 0, the workers)
 * reported: one row, rewritten once per report that carries a delta.
 */
export class TotalsStore {
  readonly #sql: SqlStorage;
  readonly values: ServiceTotals;

  constructor(sql: SqlStorage) {
    this.#sql = sql;
    sql.exec(`CREATE TABLE IF NOT EXISTS totals (id INTEGER PRIMARY KEY CHECK (id = 0), value TEXT NOT NULL)`);
    const row = sql.exec<{ value: string }>(`SELECT value FROM totals WHERE id = 0`).toArray()[0];
    this.values = { ...zeroTotals(), ...(row ? (JSON.parse(row.value) as Partial<ServiceTotals>) : {}) };
  }

  /** Adds `delta`; returns the rows written (one: the row is rewritten in place, not replaced). */
  add(delta: Partial<ServiceTotals>): number {
    addTotals(this.values, delta);
    const cursor = this.#sql.exec(`INSERT INTO totals (id, value) VALUES (0, ?) ON CONFLICT (id) DO UPDATE SET value = excluded.value`, JSON.stringify(this.values));
    for (const _ of cursor) {
      // Drained: rowsWritten is final once the statement has run.
    }
    return cursor.rowsWritten;
  }
}
