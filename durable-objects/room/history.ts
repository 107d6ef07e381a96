/**
 * A room's message log in the object's SQLite storage: the source of `seq`,
 * the room's `epoch`, and the bounded history that resume and replay read.
 *
 * Each message is stored as its serialized `message` event, so a replay sends
 * the stored text as it is and never re-serializes.
 */

export interface StoredMessage {
  seq: number;
  /** The serialized MessageEvent, exactly as sent on the wire. */
  event: string;
}

export interface HistoryBounds {
  maxMessages: number;
  maxAgeMs: number;
}

/** How often trimming runs at most; trimming per publish would double the writes. */
const TRIM_INTERVAL_MS = 1000;

export class History {
  readonly #sql: SqlStorage;
  readonly #bounds: HistoryBounds;
  #seq: number;
  #epoch: string;
  #lastTrim = 0;

  constructor(sql: SqlStorage, bounds: HistoryBounds) {
    this.#sql = sql;
    this.#bounds = bounds;
    sql.exec(`CREATE TABLE IF NOT EXISTS messages (seq INTEGER PRIMARY KEY, ts INTEGER NOT NULL, event TEXT NOT NULL)`);
    sql.exec(`CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)`);
    sql.exec(`CREATE TABLE IF NOT EXISTS idempotency (key TEXT PRIMARY KEY, seq INTEGER NOT NULL, ts INTEGER NOT NULL)`);
    this.#seq = Number(this.#meta("seq") ?? 0);
    const epoch = this.#meta("epoch");
    if (epoch) {
      this.#epoch = epoch;
    } else {
      // A fresh epoch marks a history that starts here: clients holding seqs
      // from a lost history learn that theirs no longer apply.
      this.#epoch = crypto.randomUUID();
      this.#setMeta("epoch", this.#epoch);
    }
  }

  /** Latest seq ever assigned in this room (0 before the first message). */
  get seq(): number {
    return this.#seq;
  }

  get epoch(): string {
    return this.#epoch;
  }

  /** Reads a small persistent value (room name, counters) kept beside the log. */
  meta(key: string): string | null {
    return this.#meta(key);
  }

  setMeta(key: string, value: string): void {
    this.#setMeta(key, value);
  }

  /**
   * Assigns the next seq and stores the message. `dataJson` must already be
   * valid JSON text; it is embedded in the event without re-parsing.
   */
  append(dataJson: string, ts: number): StoredMessage {
    const seq = this.#seq + 1;
    const event = `{"type":"message","seq":${seq},"data":${dataJson},"ts":${ts}}`;
    this.#sql.exec(`INSERT INTO messages (seq, ts, event) VALUES (?, ?, ?)`, seq, ts, event);
    this.#setMeta("seq", String(seq));
    this.#seq = seq;
    this.#trim(ts);
    return { seq, event };
  }

  /** Oldest seq still held, or null when the history is empty. */
  oldest(): number | null {
    const row = this.#sql.exec<{ seq: number | null }>(`SELECT min(seq) AS seq FROM messages`).one();
    return row.seq ?? null;
  }

  /** Stored messages with from <= seq <= to, in order, at most `limit`. */
  range(from: number, to: number, limit: number): StoredMessage[] {
    return this.#sql
      .exec<{ seq: number; event: string }>(
        `SELECT seq, event FROM messages WHERE seq >= ? AND seq <= ? ORDER BY seq LIMIT ?`,
        from,
        to,
        limit,
      )
      .toArray();
  }

  /** The seq an idempotency key was published at, if it was seen within the history window. */
  seenKey(key: string): number | null {
    const rows = this.#sql.exec<{ seq: number }>(`SELECT seq FROM idempotency WHERE key = ?`, key).toArray();
    return rows[0]?.seq ?? null;
  }

  rememberKey(key: string, seq: number, ts: number): void {
    this.#sql.exec(`INSERT OR REPLACE INTO idempotency (key, seq, ts) VALUES (?, ?, ?)`, key, seq, ts);
  }

  #trim(now: number): void {
    if (now - this.#lastTrim < TRIM_INTERVAL_MS && this.#seq % 64 !== 0) return;
    this.#lastTrim = now;
    const keepFrom = this.#seq - this.#bounds.maxMessages + 1;
    const cutoff = now - this.#bounds.maxAgeMs;
    this.#sql.exec(`DELETE FROM messages WHERE seq < ? OR ts < ?`, keepFrom, cutoff);
    // Idempotency keys live as long as the history could replay their message, and at least a day.
    this.#sql.exec(`DELETE FROM idempotency WHERE ts < ?`, Math.min(cutoff, now - 86_400_000));
  }

  #meta(key: string): string | null {
    const rows = this.#sql.exec<{ value: string }>(`SELECT value FROM meta WHERE key = ?`, key).toArray();
    return rows[0]?.value ?? null;
  }

  #setMeta(key: string, value: string): void {
    this.#sql.exec(`INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)`, key, value);
  }
}
