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

  add(delta: Partial<ServiceTotals>): void {
    addTotals(this.values, delta);
    this.#sql.exec(`INSERT OR REPLACE INTO totals (id, value) VALUES (0, ?)`, JSON.stringify(this.values));
  }
}
