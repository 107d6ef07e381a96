/**
 * Idempotency keys a room has published with (a broadcast's key, handed to
 * every room), so that a retry publishes nothing twice. One row per key in an
 * `idempotency` table, written in the same transaction as the message it
 * names; pruned at most once a minute (each delete is a billed row write).
 */

/** Keys are pruned at most this often. */
const PRUNE_INTERVAL_MS = 60_000;
/** And kept at least this long, so a retried broadcast is recognised well after it first ran. */
export const KEY_MIN_AGE_MS = 86_400_000;

export class IdempotencyKeys {
  readonly #sql: SqlStorage;
  /** Keys are kept this long at least (the longer of KEY_MIN_AGE_MS and the history's age bound). */
  readonly #keepMs: number;
  #exists: boolean;
  #lastPrune = 0;

  constructor(sql: SqlStorage, historyMaxAgeMs: number) {
    this.#sql = sql;
    this.#keepMs = Math.max(KEY_MIN_AGE_MS, historyMaxAgeMs);
    this.#exists = sql.exec<{ n: number }>(`SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'idempotency'`).one().n > 0;
  }

  /** Whether the table exists. */
  get exists(): boolean {
    return this.#exists;
  }

  /** The seq `key` was published at, if it was seen recently. */
  seqOf(key: string): number | null {
    if (!this.#exists) return null;
    const rows = this.#sql.exec<{ seq: number }>(`SELECT seq FROM idempotency WHERE key = ?`, key).toArray();
    return rows[0]?.seq ?? null;
  }

  /** Remembers `key` as published at `seq`; call inside the transaction that stores the message. */
  remember(key: string, seq: number, ts: number): void {
    if (!this.#exists) {
      this.#sql.exec(`CREATE TABLE IF NOT EXISTS idempotency (key TEXT PRIMARY KEY, seq INTEGER NOT NULL, ts INTEGER NOT NULL)`);
      this.#exists = true;
    }
    this.#sql.exec(`INSERT OR REPLACE INTO idempotency (key, seq, ts) VALUES (?, ?, ?)`, key, seq, ts);
    if (ts - this.#lastPrune >= PRUNE_INTERVAL_MS) {
      this.#lastPrune = ts;
      this.#sql.exec(`DELETE FROM idempotency WHERE ts < ?`, ts - this.#keepMs);
    }
  }

  /** When the newest key was stored (0 when none is): an empty room keeps its storage until its keys expire. */
  newestTs(): number {
    if (!this.#exists) return 0;
    return this.#sql.exec<{ ts: number | null }>(`SELECT max(ts) AS ts FROM idempotency`).one().ts ?? 0;
  }

  /** After the room gave its storage back (deleteAll). */
  reset(): void {
    this.#exists = false;
    this.#lastPrune = 0;
  }
}
