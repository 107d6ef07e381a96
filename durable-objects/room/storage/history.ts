import type { BatchLimits } from "../../engine/frames";
import { tagOf, type Message } from "../../engine/message";
import type { SourceRead } from "../../engine/stream";
import type { Run } from "../../engine/frames";
import type { MetaStore } from "./meta-store";
import type { HistoryRowSpan, KeyedRow, RoomHistory, StoredRow } from "./room-history";
import { createLogTable, fitsSize, hasKeysColumn, newestRow, remapRing, storedRing } from "./ring-layout";

/**
 * A room's message log in the object's SQLite storage: the source of the
 * stored `seq`, the room's `epoch`, and the bounded history that resume and
 * catch-up read.
 *
 * Each row holds the messages of one flush (up to ROW_MAX_BYTES), so rows
 * written fall with coalescing: a flush of 4 messages costs one row write,
 * not four. Rows sit in a ring of HISTORY_MAX_MESSAGES slots (slot = row
 * number mod size): a write replaces the row that many rows older, so
 * nothing is ever deleted (rows written are what a busy room pays for). A
 * row holds at least one message, so the ring always covers the last
 * HISTORY_MAX_MESSAGES messages; older rows still in the ring are not served.
 * A row small enough for one frame is sent back whole; a larger one is cut
 * into frame-sized pieces using the message sizes stored beside it.
 *
 * Rows are read by slot, one point read per row: catch-up reads exactly the
 * rows it sends. Finding the row that holds an arbitrary seq is a binary
 * search (about log2(size) point reads), done in memory for rows this
 * instance wrote.
 *
 * A room that is only looked at has no tables: they are created by the first
 * write, so reading a room that does not exist leaves no storage behind. The
 * epoch is kept in the room's MetaStore, written with the first message. A
 * ring written with another size than the room's now is re-mapped once when
 * the room wakes (ring-layout.ts), so the seq is never misread.
 */

export interface HistoryBounds {
  maxMessages: number;
  maxAgeMs: number;
}

/** What a catch-up read returned. */
export type HistoryRead = SourceRead;

interface RowMeta {
  row: number;
  first: number;
  last: number;
  ts: number;
}

interface RowData extends RowMeta {
  /** UTF-8 bytes of `events`. */
  bytes: number;
  /** JS string length and UTF-8 size of each event, comma-separated ("" for a single message). */
  lengths: string;
  sizes: string;
  /** The messages' events, comma-separated. */
  events: string;
}

/**
 * Largest row: a flush bigger than this is stored as several rows. Well under
 * the platform's 2 MB per row, and small enough that a catch-up read of a row
 * it only partly sends stays cheap.
 */
export const ROW_MAX_BYTES = 256 * 1024;

export class History implements RoomHistory {
  /** Every flush is written as rows of the room's SQLite storage. */
  readonly durable = true;
  readonly #sql: SqlStorage;
  readonly #transaction: (write: () => void) => void;
  readonly #meta: MetaStore;
  readonly #size: number;
  readonly #maxAgeMs: number;
  #tables: boolean;
  /** Whether the log table has its `keys` column (added by the next write when it does not). */
  #keysColumn = false;
  #latestRow = 0;
  #seq = 0;
  #latestTs = 0;
  /** First seq of each row from #indexFrom to #latestRow: the rows this instance wrote. */
  #firsts: number[] = [];
  #indexFrom = 0;
  #epoch: string;
  #epochStored: boolean;

  constructor(storage: Pick<DurableObjectStorage, "sql" | "transactionSync">, meta: MetaStore, bounds: HistoryBounds) {
    const sql = storage.sql;
    this.#sql = sql;
    this.#meta = meta;
    this.#transaction = (write) => storage.transactionSync(write);
    this.#size = Math.max(1, bounds.maxMessages);
    this.#maxAgeMs = bounds.maxAgeMs;
    const tables = new Set(
      sql.exec<{ name: string }>(`SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('log', 'history')`).toArray().map((r) => r.name),
    );
    if (tables.has("history")) {
      // The log used to be one row per message in a table of that name: its seqs
      // cannot be carried over, so the room starts a new history under a new epoch.
      sql.exec(`DROP TABLE history`);
      meta.delete(EPOCH_KEY);
    }
    this.#tables = tables.has("log");
    if (this.#tables) this.#openRing(storage, bounds.maxAgeMs);
    this.#indexFrom = this.#latestRow + 1;
    // A fresh epoch marks a history that starts here: clients holding seqs from
    // a lost history learn that theirs no longer apply. It is stored once it has
    // been handed out (first socket or first message).
    const epoch = meta.get(EPOCH_KEY);
    this.#epoch = epoch ?? crypto.randomUUID();
    this.#epochStored = epoch !== null;
  }

  /** After the room gave its storage back (deleteAll): the next write starts a new history, under a new epoch. */
  reset(): void {
    this.#tables = false;
    this.#keysColumn = false;
    this.#latestRow = 0;
    this.#seq = 0;
    this.#latestTs = 0;
    this.#firsts = [];
    this.#indexFrom = 1;
    this.#epoch = crypto.randomUUID();
    this.#epochStored = false;
  }

  /** Latest seq stored in this room (0 before the first message). */
  get seq(): number {
    return this.#seq;
  }

  /** When the newest stored message was published (0 when there is none). */
  get latestTs(): number {
    return this.#latestTs;
  }

  get epoch(): string {
    return this.#epoch;
  }

  /** Whether this room has stored a message. */
  get exists(): boolean {
    return this.#tables;
  }

  /** The epoch, to hand to a client: from now on it is stored, so it outlives this instance. */
  issueEpoch(): string {
    if (!this.#epochStored) {
      this.#meta.set(EPOCH_KEY, this.#epoch);
      this.#epochStored = true;
    }
    return this.#epoch;
  }

  /**
   * Stores one flush's messages (consecutive seqs) as one row, or several
   * when they exceed ROW_MAX_BYTES, in one transaction with whatever `alongside`
   * writes (a broadcast's idempotency key). `keyOf` gives a message's
   * publish-key entry (publish-keys.ts), kept in the row's `keys` column:
   * keys cost no row of their own. Returns the rows written, oldest first.
   * Nothing changes, in storage or here, when a write throws.
   */
  append(
    messages: readonly Message[],
    ts: number,
    alongside?: () => void,
    keyOf?: (seq: number) => string | undefined,
  ): HistoryRowSpan[] {
    const records: (RowData & { keys: string })[] = [];
    // A row's keys count against its bytes, so a row stays within ROW_MAX_BYTES whatever its keys.
    const weight = (m: Message): number => m.bytes + (keyOf?.(m.seq)?.length ?? 0);
    for (let start = 0; start < messages.length; ) {
      let end = start + 1;
      let bytes = weight(messages[start] as Message);
      while (end < messages.length && bytes + weight(messages[end] as Message) + 1 <= ROW_MAX_BYTES) {
        bytes += weight(messages[end] as Message) + 1;
        end += 1;
      }
      const group = messages.slice(start, end);
      const single = group.length === 1;
      const first = (group[0] as Message).seq;
      const keys: string[] = [];
      if (keyOf) {
        for (const m of group) {
          const entry = keyOf(m.seq);
          if (entry !== undefined) keys.push(`${m.seq - first}:${entry}`);
        }
      }
      records.push({
        row: this.#latestRow + records.length + 1,
        first: (group[0] as Message).seq,
        last: (group[group.length - 1] as Message).seq,
        ts,
        bytes: group.reduce((sum, m) => sum + m.bytes, group.length - 1),
        lengths: single ? "" : group.map((m) => m.event.length).join(","),
        sizes: single ? "" : group.map((m) => m.bytes).join(","),
        events: single ? (group[0] as Message).event : group.map((m) => m.event).join(","),
        keys: keys.join(" "),
      });
      start = end;
    }
    this.#transaction(() => {
      this.#ensureTables();
      for (const r of records) {
        this.#sql.exec(
          `INSERT INTO log (slot, row, first, last, ts, bytes, lengths, sizes, events, keys) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (slot) DO UPDATE SET row = excluded.row, first = excluded.first, last = excluded.last, ts = excluded.ts,
             bytes = excluded.bytes, lengths = excluded.lengths, sizes = excluded.sizes, events = excluded.events, keys = excluded.keys`,
          r.row % this.#size,
          r.row,
          r.first,
          r.last,
          r.ts,
          r.bytes,
          r.lengths,
          r.sizes,
          r.events,
          r.keys,
        );
      }
      alongside?.();
      if (!this.#epochStored) this.#meta.set(EPOCH_KEY, this.#epoch);
    });
    this.#epochStored = true;
    const newest = records[records.length - 1];
    if (newest === undefined) return [];
    this.#latestRow = newest.row;
    this.#seq = newest.last;
    this.#latestTs = ts;
    for (const r of records) this.#firsts.push(r.first);
    if (this.#firsts.length > 2 * this.#size) {
      const drop = this.#firsts.length - this.#size;
      this.#firsts = this.#firsts.slice(drop);
      this.#indexFrom += drop;
    }
    return records.map(({ row, first, last }) => ({ row, first, last }));
  }

  /**
   * Reads stored messages from seq `from` on as runs that each fit one frame
   * (`limits`), until at least `budget` bytes are taken or the latest message
   * is reached (so it may exceed the budget by one run). `hintRow` is the row
   * that holds `from` when the caller knows it (the `nextRow` of its previous
   * read). A read that stops inside a row continues there next time.
   */
  read(from: number, budget: number, limits: BatchLimits, hintRow = 0, now = Date.now()): HistoryRead {
    const result: HistoryRead = { runs: [], lost: null, nextSeq: from, nextRow: hintRow, rowsRead: 0 };
    const latest = this.#seq;
    if (from > latest) return result;
    let row = hintRow > 0 ? hintRow : this.#rowHolding(from, result);
    let located = hintRow <= 0;
    let taken = 0;
    while (from <= latest && taken < budget) {
      const data = this.#row(row, result);
      if (data !== null && (data.last < from || data.first > from) && !located) {
        // The hint did not hold `from` after all: look it up.
        row = this.#rowHolding(from, result);
        located = true;
        continue;
      }
      located = true;
      if (data === null || !this.#kept(data, now) || data.last < from) {
        // Aged out or overwritten: continue from the oldest row still kept.
        const next = this.#firstKept(row + 1, now, result);
        if (next === null) {
          result.lost = mergeLost(result.lost, from, latest);
          from = latest + 1;
          break;
        }
        if (next.first > from) result.lost = mergeLost(result.lost, from, next.first - 1);
        from = Math.max(from, next.first);
        row = next.row;
        continue;
      }
      if (data.first > from) {
        result.lost = mergeLost(result.lost, from, data.first - 1);
        from = data.first;
      }
      if (data.first === from && data.last - data.first + 1 <= limits.maxEvents && data.bytes + 2 <= limits.maxBytes) {
        // The common case: the row is one frame's worth, sent as stored.
        result.runs.push({ text: data.events, bytes: data.bytes, count: data.last - data.first + 1, firstSeq: data.first, lastSeq: data.last, lastTag: tagOf(data.events) });
        taken += data.bytes;
        from = data.last + 1;
      } else {
        for (const run of pieces(data, from, limits)) {
          if (taken >= budget) break;
          result.runs.push(run);
          taken += run.bytes;
          from = run.lastSeq + 1;
        }
      }
      if (from > data.last) row += 1;
    }
    result.nextSeq = from;
    result.nextRow = row;
    return result;
  }

  /** Oldest seq still within both bounds, or null when the history is empty. */
  oldest(now = Date.now()): number | null {
    if (this.#latestRow === 0) return null;
    const kept = this.#firstKept(Math.max(1, this.#latestRow - this.#size + 1), now, null);
    if (kept === null) return null;
    return Math.max(kept.first, this.#seq - this.#size + 1, 1);
  }

  /** The newest row written (0 before the first). */
  get latestRow(): number {
    return this.#latestRow;
  }

  /** Whether row `row`, written at `ts`, is still in the ring and within the age bound. */
  keeps(row: number, ts: number, now = Date.now()): boolean {
    return row > this.#latestRow - this.#size && row <= this.#latestRow && row >= 1 && ts >= now - this.#maxAgeMs;
  }

  /** The row that holds `seq`, or the oldest row in the ring when `seq` is older than all of them; 0 when there is none. */
  rowOf(seq: number, counter: { rowsRead: number }): number {
    return this.#latestRow === 0 ? 0 : this.#rowHolding(seq, counter);
  }

  /** The oldest row still within both bounds and its first seq, or null when none is. */
  firstKeptRow(counter: { rowsRead: number }, now = Date.now()): { row: number; first: number } | null {
    if (this.#latestRow === 0) return null;
    const kept = this.#firstKept(Math.max(1, this.#latestRow - this.#size + 1), now, counter);
    return kept === null ? null : { row: kept.row, first: kept.first };
  }

  /**
   * Up to `count` rows from `fromRow` on (forward) or back from it
   * (backward), as long as they are kept, with their messages' event texts:
   * one range read over the slots (two where the ring wraps), each row read
   * whole once. What a history page reads (history-pages.ts).
   */
  keptRows(fromRow: number, direction: "forward" | "backward", count: number, counter: { rowsRead: number }, now = Date.now()): StoredRow[] {
    const oldest = Math.max(1, this.#latestRow - this.#size + 1);
    const [low, high] =
      direction === "forward" ? [Math.max(fromRow, oldest), Math.min(this.#latestRow, fromRow + count - 1)] : [Math.max(oldest, fromRow - count + 1), Math.min(fromRow, this.#latestRow)];
    if (!this.#tables || low > high) return [];
    const rows = this.#rowsBetween<RowData>(low, high, "row, first, last, ts, bytes, lengths, sizes, events", counter);
    if (direction === "backward") rows.reverse();
    const kept: StoredRow[] = [];
    for (const row of rows) {
      if (!this.#kept(row, now)) break;
      kept.push({ row: row.row, first: row.first, last: row.last, ts: row.ts, events: eventsOf(row) });
    }
    return kept;
  }

  /**
   * The rows written at or after `since` (ms), within the age bound and still
   * in the ring, that carry publish keys, oldest first, with each key entry
   * and its message's seq: what a room's publish keys are rebuilt from when it
   * wakes (publish-keys.ts). A key lives as long as its row is in the ring, as
   * `keeps` says, even when its message is older than the last `maxMessages`
   * that history serves. Reads the rows in that span once each, plus a binary
   * search for where it starts.
   */
  keyedRows(since: number, counter: { rowsRead: number }, now = Date.now()): KeyedRow[] {
    if (!this.#tables || !this.#keysColumn || this.#latestRow === 0) return [];
    const start = this.#firstRowSince(Math.max(since, now - this.#maxAgeMs), counter);
    if (start === null) return [];
    return this.#rowsBetween<KeysColumn>(start.row, this.#latestRow, "row, first, ts, keys", counter, "keys != ''").map(keyedRowOf);
  }

  /**
   * The rows from `fromRow` to `toRow` still in the ring whose publish keys
   * contain `text`, oldest first, with their key entries: where a key that
   * left the room's memory is looked up (publish-keys.ts). One range read over
   * those rows' slots; SQLite compares each row's keys, and only the rows that
   * match are returned.
   */
  keyedRowsContaining(text: string, fromRow: number, toRow: number, counter: { rowsRead: number }): KeyedRow[] {
    if (!this.#tables || !this.#keysColumn || this.#latestRow === 0) return [];
    const low = Math.max(fromRow, this.#latestRow - this.#size + 1, 1);
    const high = Math.min(toRow, this.#latestRow);
    if (low > high) return [];
    return this.#rowsBetween<KeysColumn>(low, high, "row, first, ts, keys", counter, "instr(keys, ?) > 0", text).map(keyedRowOf);
  }

  // -------------------------------------------------------------------------

  #ensureTables(): void {
    if (!this.#tables) {
      createLogTable(this.#sql, "log");
      this.#tables = true;
      this.#keysColumn = true;
    }
    if (!this.#keysColumn) {
      // A table from before keys lived in rows: adding a column rewrites no row.
      this.#sql.exec(`ALTER TABLE log ADD COLUMN keys TEXT NOT NULL DEFAULT ''`);
      this.#keysColumn = true;
    }
  }

  /** Rows `low`..`high` (within the ring), oldest first, by range reads over their slots; `where` may bind `bindings`. */
  #rowsBetween<T extends { row: number }>(low: number, high: number, columns: string, counter: { rowsRead: number }, where = "1", ...bindings: SqlStorageValue[]): T[] {
    const a = low % this.#size;
    const b = high % this.#size;
    const ranges = a <= b ? [[a, b]] : [[a, this.#size - 1], [0, b]];
    const rows: T[] = [];
    for (const [from, to] of ranges) {
      const cursor = this.#sql.exec<T & Record<string, SqlStorageValue>>(`SELECT ${columns} FROM log WHERE slot BETWEEN ? AND ? AND ${where} ORDER BY slot`, from, to, ...bindings);
      rows.push(...cursor.toArray());
      counter.rowsRead += cursor.rowsRead;
    }
    return rows.filter((r) => r.row >= low && r.row <= high);
  }

  #kept(meta: RowMeta, now: number): boolean {
    return meta.last > this.#seq - this.#size && meta.ts >= now - this.#maxAgeMs && meta.row > this.#latestRow - this.#size;
  }

  #rowMeta(row: number, counter: { rowsRead: number } | null): RowMeta | null {
    if (row < 1 || row > this.#latestRow || row <= this.#latestRow - this.#size) return null;
    if (counter) counter.rowsRead += 1;
    const found = this.#sql
      .exec<{ row: number; first: number; last: number; ts: number }>(`SELECT row, first, last, ts FROM log WHERE slot = ?`, row % this.#size)
      .toArray()[0];
    return found && found.row === row ? found : null;
  }

  #row(row: number, counter: { rowsRead: number }): RowData | null {
    if (row < 1 || row > this.#latestRow || row <= this.#latestRow - this.#size) return null;
    counter.rowsRead += 1;
    const found = this.#sql
      .exec<{ row: number; first: number; last: number; ts: number; bytes: number; lengths: string; sizes: string; events: string }>(
        `SELECT row, first, last, ts, bytes, lengths, sizes, events FROM log WHERE slot = ?`,
        row % this.#size,
      )
      .toArray()[0];
    return found && found.row === row ? found : null;
  }

  /** The row that holds `seq`, or the oldest row in the ring when `seq` is older than all of them. */
  #rowHolding(seq: number, counter: { rowsRead: number }): number {
    const firsts = this.#firsts;
    if (firsts.length > 0 && seq >= (firsts[0] as number)) {
      let lo = 0;
      let hi = firsts.length - 1;
      while (lo < hi) {
        const mid = (lo + hi + 1) >> 1;
        if ((firsts[mid] as number) <= seq) lo = mid;
        else hi = mid - 1;
      }
      return this.#indexFrom + lo;
    }
    // Rows from before this instance: binary search on first seq by point reads.
    let lo = Math.max(1, this.#latestRow - this.#size + 1);
    let hi = firsts.length > 0 ? this.#indexFrom - 1 : this.#latestRow;
    while (lo < hi) {
      const mid = Math.floor((lo + hi + 1) / 2);
      const meta = this.#rowMeta(mid, counter);
      if (meta !== null && meta.first <= seq) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }

  /** The first row at or after `fromRow` still within both bounds (rows are in seq and time order). */
  #firstKept(fromRow: number, now: number, counter: { rowsRead: number } | null): RowMeta | null {
    let lo = Math.max(fromRow, this.#latestRow - this.#size + 1, 1);
    let hi = this.#latestRow;
    let found: RowMeta | null = null;
    while (lo <= hi) {
      const mid = Math.floor((lo + hi) / 2);
      const meta = this.#rowMeta(mid, counter);
      if (meta !== null && this.#kept(meta, now)) {
        found = meta;
        hi = mid - 1;
      } else {
        lo = mid + 1;
      }
    }
    return found;
  }

  /** The oldest row still in the ring written at or after `since` (rows are in time order), or null when none is. */
  #firstRowSince(since: number, counter: { rowsRead: number }): RowMeta | null {
    let lo = Math.max(1, this.#latestRow - this.#size + 1);
    let hi = this.#latestRow;
    let found: RowMeta | null = null;
    while (lo <= hi) {
      const mid = Math.floor((lo + hi) / 2);
      const meta = this.#rowMeta(mid, counter);
      if (meta !== null && meta.ts >= since) {
        found = meta;
        hi = mid - 1;
      } else {
        lo = mid + 1;
      }
    }
    return found;
  }

  /**
   * Finds the newest row of the stored ring, after re-mapping it when it was
   * written with another size than the room's now (ring-layout.ts).
   */
  #openRing(storage: Pick<DurableObjectStorage, "transactionSync">, maxAgeMs: number): void {
    this.#keysColumn = hasKeysColumn(this.#sql);
    const stored = storedRing(this.#sql);
    if (stored === null) return;
    if (!fitsSize(stored, this.#size)) {
      storage.transactionSync(() => remapRing(this.#sql, stored, this.#size, Date.now() - maxAgeMs, this.#keysColumn));
      this.#keysColumn = true;
    }
    const latest = newestRow(this.#sql, this.#size);
    if (latest === 0) return;
    const meta = this.#sql.exec<{ last: number; ts: number }>(`SELECT last, ts FROM log WHERE slot = ?`, latest % this.#size).toArray()[0];
    this.#latestRow = latest;
    this.#seq = meta?.last ?? 0;
    this.#latestTs = meta?.ts ?? 0;
  }

}

export type { KeyedRow, StoredRow } from "./room-history";

/** What a row's `keys` column is read with. */
interface KeysColumn {
  row: number;
  first: number;
  ts: number;
  keys: string;
}

/** A row's `keys` column as its entries, each `<offset in the row>:<entry>`, space-separated. */
function keyedRowOf(r: KeysColumn): KeyedRow {
  return {
    row: r.row,
    ts: r.ts,
    entries: r.keys.split(" ").map((item) => {
      const colon = item.indexOf(":");
      return { seq: r.first + Number(item.slice(0, colon)), entry: item.slice(colon + 1) };
    }),
  };
}

/** A row's event texts, cut by their stored lengths. */
function eventsOf(row: RowData): string[] {
  if (row.lengths === "") return [row.events];
  const events: string[] = [];
  let offset = 0;
  for (const length of row.lengths.split(",")) {
    const n = Number(length);
    events.push(row.events.slice(offset, offset + n));
    offset += n + 1;
  }
  return events;
}

/** The meta key the epoch is stored under. */
const EPOCH_KEY = "epoch";

function mergeLost(lost: HistoryRead["lost"], from: number, to: number): HistoryRead["lost"] {
  return lost === null ? { from, to } : { from: lost.from, to };
}

/**
 * A row's messages from `from` on, cut into runs that each fit one frame:
 * for rows larger than a frame, and for reads that start (or resume) inside
 * a row. Each run is a slice of the stored text, so nothing is re-serialized.
 */
function* pieces(row: RowData, from: number, limits: BatchLimits): Generator<Run> {
  const lengths = row.lengths === "" ? [row.events.length] : row.lengths.split(",").map(Number);
  const sizes = row.sizes === "" ? [row.bytes] : row.sizes.split(",").map(Number);
  let offset = 0;
  let index = from - row.first;
  for (let i = 0; i < index; i++) offset += (lengths[i] as number) + 1;
  while (index < lengths.length) {
    const start = offset;
    let end = index;
    let chars = 0;
    let bytes = 0;
    do {
      chars += (lengths[end] as number) + (end > index ? 1 : 0);
      bytes += (sizes[end] as number) + (end > index ? 1 : 0);
      end += 1;
    } while (
      end < lengths.length &&
      end - index < limits.maxEvents &&
      bytes + (sizes[end] as number) + 1 + 2 <= limits.maxBytes
    );
    const text = row.events.slice(start, start + chars);
    yield { text, bytes, count: end - index, firstSeq: row.first + index, lastSeq: row.first + end - 1, lastTag: tagOf(text) };
    offset = start + chars + 1;
    index = end;
  }
}
