/**
 * A room's message log in the object's SQLite storage: the source of `seq`,
 * the room's `epoch`, and the bounded history that resume and replay read.
 *
 * The log is a ring of HISTORY_MAX_MESSAGES slots (slot = seq mod size), so a
 * publish costs exactly one row write: no separate seq counter to update and
 * no trim deletes (storage rows written dominate the bill of a busy room).
 * The age bound is applied when reading. The latest seq is the largest one in
 * the ring, which the newest message always occupies.
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

/** Idempotency keys are pruned at most this often (each delete is a billed row write). */
const KEY_PRUNE_INTERVAL_MS = 60_000;
/** And kept at least this long, so a retried broadcast is recognised well after it first ran. */
const KEY_MIN_AGE_MS = 86_400_000;

export class History {
  readonly #sql: SqlStorage;
  readonly #size: number;
  readonly #maxAgeMs: number;
  #seq: number;
  #epoch: string;
  #epochStored: boolean;
  #lastKeyPrune = 0;

  constructor(sql: SqlStorage, bounds: HistoryBounds) {
    this.#sql = sql;
    this.#size = Math.max(1, bounds.maxMessages);
    this.#maxAgeMs = bounds.maxAgeMs;
    sql.exec(`CREATE TABLE IF NOT EXISTS history (slot INTEGER PRIMARY KEY, seq INTEGER NOT NULL, ts INTEGER NOT NULL, event TEXT NOT NULL)`);
    sql.exec(`CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)`);
    sql.exec(`CREATE TABLE IF NOT EXISTS idempotency (key TEXT PRIMARY KEY, seq INTEGER NOT NULL, ts INTEGER NOT NULL)`);
    this.#seq = sql.exec<{ seq: number | null }>(`SELECT max(seq) AS seq FROM history`).one().seq ?? 0;
    // A fresh epoch marks a history that starts here: clients holding seqs from
    // a lost history learn that theirs no longer apply. It is stored once it has
    // been handed out (first socket or first message), so looking at a room that
    // was never used writes nothing.
    const epoch = this.#meta("epoch");
    this.#epoch = epoch ?? crypto.randomUUID();
    this.#epochStored = epoch !== null;
  }

  /** Latest seq ever assigned in this room (0 before the first message). */
  get seq(): number {
    return this.#seq;
  }

  get epoch(): string {
    return this.#epoch;
  }

  /** The epoch, to hand to a client: from now on it is stored, so it outlives this instance. */
  issueEpoch(): string {
    if (!this.#epochStored) {
      this.#setMeta("epoch", this.#epoch);
      this.#epochStored = true;
    }
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
   * Assigns the next seq and stores the message in its slot, replacing the
   * message `size` seqs older. `dataJson` must already be valid JSON text; it is
   * embedded in the event without re-parsing.
   */
  append(dataJson: string, ts: number): StoredMessage {
    const seq = this.#seq + 1;
    const event = `{"type":"message","seq":${seq},"data":${dataJson},"ts":${ts}}`;
    this.#sql.exec(
      `INSERT INTO history (slot, seq, ts, event) VALUES (?, ?, ?, ?)
       ON CONFLICT (slot) DO UPDATE SET seq = excluded.seq, ts = excluded.ts, event = excluded.event`,
      seq % this.#size,
      seq,
      ts,
      event,
    );
    this.#seq = seq;
    this.issueEpoch();
    return { seq, event };
  }

  /** Oldest seq still within both bounds, or null when the history is empty. */
  oldest(now = Date.now()): number | null {
    const row = this.#sql
      .exec<{ seq: number | null }>(`SELECT min(seq) AS seq FROM history WHERE seq > ? AND ts >= ?`, this.#seq - this.#size, now - this.#maxAgeMs)
      .one();
    return row.seq ?? null;
  }

  /** Stored messages with from <= seq <= to (within the bounds), in order, at most `limit`. */
  range(from: number, to: number, limit: number, now = Date.now()): StoredMessage[] {
    const first = Math.max(from, this.#seq - this.#size + 1, 1);
    const last = Math.min(to, this.#seq);
    if (first > last) return [];
    const a = first % this.#size;
    const b = last % this.#size;
    // The seqs first..last sit in one run of slots, or two when they wrap around the ring.
    const slots = a <= b ? `slot BETWEEN ${a} AND ${b}` : `(slot >= ${a} OR slot <= ${b})`;
    return this.#sql
      .exec<{ seq: number; event: string }>(
        `SELECT seq, event FROM history WHERE ${slots} AND seq BETWEEN ? AND ? AND ts >= ? ORDER BY seq LIMIT ?`,
        first,
        last,
        now - this.#maxAgeMs,
        limit,
      )
      .toArray();
  }

  /** The seq an idempotency key was published at, if it was seen recently. */
  seenKey(key: string): number | null {
    const rows = this.#sql.exec<{ seq: number }>(`SELECT seq FROM idempotency WHERE key = ?`, key).toArray();
    return rows[0]?.seq ?? null;
  }

  rememberKey(key: string, seq: number, ts: number): void {
    this.#sql.exec(`INSERT OR REPLACE INTO idempotency (key, seq, ts) VALUES (?, ?, ?)`, key, seq, ts);
    if (ts - this.#lastKeyPrune >= KEY_PRUNE_INTERVAL_MS) {
      this.#lastKeyPrune = ts;
      this.#sql.exec(`DELETE FROM idempotency WHERE ts < ?`, ts - Math.max(KEY_MIN_AGE_MS, this.#maxAgeMs));
    }
  }

  #meta(key: string): string | null {
    const rows = this.#sql.exec<{ value: string }>(`SELECT value FROM meta WHERE key = ?`, key).toArray();
    return rows[0]?.value ?? null;
  }

  #setMeta(key: string, value: string): void {
    this.#sql.exec(`INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)`, key, value);
  }
}
