import { rowsWrittenBy, tableExists } from "./sql-writes";

/**
 * Largest row of the outbox, bytes of its events: well under the platform's
 * 2 MB per row, and room for a few of the largest message events (64 KiB of
 * data each).
 */
export const OUTBOX_ROW_MAX_BYTES = 256 * 1024;

/** One event as the outbox stores it: its JSON text, final (id included), sent byte for byte. */
export interface OutboxEvent {
  text: string;
  /** UTF-8 bytes of `text`. */
  bytes: number;
}

/** What memory keeps of an undelivered row (its events stay in storage until they are sent). */
export interface OutboxRow {
  row: number;
  count: number;
  /** UTF-8 bytes of the row's events, commas between them included. */
  bytes: number;
  /** When its first event and its last were recorded. */
  opened: number;
  closed: number;
}

/** One request's worth of rows, oldest first. */
export interface OutboxBatch {
  lastRow: number;
  rows: number;
  count: number;
  /** The rows' stored event texts joined as they are, comma-separated: what the format wraps into a request. */
  events: string;
}

/** A row taken out of the outbox (to be kept as dead letters). */
export interface TakenRow {
  count: number;
  events: string;
  rowsWritten: number;
}

/**
 * A room's webhook events that the receiver has not acknowledged yet, in
 * the room's SQLite storage (table `webhook_outbox`), oldest first.
 *
 * A row holds the events of one turn of the room (its presence changes, or
 * one flush's messages), comma-separated, up to WEBHOOK_BATCH_MAX_EVENTS
 * events and OUTBOX_ROW_MAX_BYTES. While the newest row waits for delivery
 * and is not in a request, later turns add their events to it instead of
 * writing a row of their own: the same one row written per turn, but fewer
 * rows to delete and fewer requests. A request carries whole rows; the rows
 * it carried are deleted when the receiver acknowledges it (one row written
 * per row deleted). The table is created by the first event, so a room that
 * records nothing has none.
 *
 * Memory keeps each undelivered row's size and times (read once when the
 * room starts: usually no row at all), so deciding what to send or keep
 * reads nothing; a request reads exactly the rows it sends.
 */
export class WebhookOutbox {
  readonly #sql: SqlStorage;
  readonly #rowMaxEvents: number;
  #exists: boolean;
  #rows: OutboxRow[] = [];
  #pendingEvents = 0;
  /** Row numbers only grow within an instance, so "rows up to n" always means the same rows. */
  #nextRow = 1;
  /** Rows up to this one are in a request: nothing is added to them. */
  #sendingThrough = 0;

  constructor(sql: SqlStorage, rowMaxEvents: number) {
    this.#sql = sql;
    this.#rowMaxEvents = Math.max(1, rowMaxEvents);
    this.#exists = false;
    this.reload();
  }

  /** Reads what is undelivered from storage (at start, and after a transaction that wrote here rolled back). */
  reload(): void {
    this.#exists = tableExists(this.#sql, "webhook_outbox");
    this.#rows = this.#exists
      ? this.#sql.exec<{ row: number; count: number; bytes: number; opened: number; closed: number }>(
          `SELECT row, count, bytes, opened, closed FROM webhook_outbox ORDER BY row`,
        ).toArray()
      : [];
    this.#pendingEvents = this.#rows.reduce((sum, r) => sum + r.count, 0);
    this.#nextRow = Math.max(this.#nextRow, (this.#rows.at(-1)?.row ?? 0) + 1);
  }

  get exists(): boolean {
    return this.#exists;
  }

  get pendingEvents(): number {
    return this.#pendingEvents;
  }

  get pendingRows(): number {
    return this.#rows.length;
  }

  /** The oldest undelivered row, if any. */
  oldest(): OutboxRow | undefined {
    return this.#rows[0];
  }

  /**
   * Stores `events` after everything recorded so far; call inside the
   * transaction of the change they describe. Returns the rows written.
   */
  append(events: readonly OutboxEvent[], now: number): number {
    if (events.length === 0) return 0;
    let written = this.#ensureTable();
    let next = 0;
    const tail = this.#rows.at(-1);
    if (tail && tail.row > this.#sendingThrough) {
      const start = next;
      let { count, bytes } = tail;
      while (next < events.length && this.#fits(count, bytes, events[next] as OutboxEvent)) {
        bytes += (events[next] as OutboxEvent).bytes + 1;
        count += 1;
        next += 1;
      }
      if (next > start) {
        const text = events.slice(start, next).map((e) => e.text).join(",");
        written += rowsWrittenBy(
          this.#sql,
          `UPDATE webhook_outbox SET events = events || ',' || ?, count = ?, bytes = ?, closed = ? WHERE row = ?`,
          text,
          count,
          bytes,
          now,
          tail.row,
        );
        this.#pendingEvents += count - tail.count;
        Object.assign(tail, { count, bytes, closed: now });
      }
    }
    while (next < events.length) {
      const start = next;
      let count = 1;
      let bytes = (events[next] as OutboxEvent).bytes;
      next += 1;
      while (next < events.length && this.#fits(count, bytes, events[next] as OutboxEvent)) {
        bytes += (events[next] as OutboxEvent).bytes + 1;
        count += 1;
        next += 1;
      }
      const row = this.#nextRow++;
      written += rowsWrittenBy(
        this.#sql,
        `INSERT INTO webhook_outbox (row, opened, closed, count, bytes, events) VALUES (?, ?, ?, ?, ?, ?)`,
        row,
        now,
        now,
        count,
        bytes,
        events.slice(start, next).map((e) => e.text).join(","),
      );
      this.#rows.push({ row, count, bytes, opened: now, closed: now });
      this.#pendingEvents += count;
    }
    return written;
  }

  /** The oldest rows, as one request of at most `maxEvents` events and about `maxBytes` (always at least one row). */
  peek(maxEvents: number, maxBytes: number): OutboxBatch | null {
    const first = this.#rows[0];
    if (!first) return null;
    let end = 1;
    let events = first.count;
    let bytes = first.bytes;
    while (end < this.#rows.length) {
      const row = this.#rows[end] as OutboxRow;
      if (events + row.count > maxEvents || bytes + row.bytes + 1 > maxBytes) break;
      events += row.count;
      bytes += row.bytes + 1;
      end += 1;
    }
    const lastRow = (this.#rows[end - 1] as OutboxRow).row;
    const texts = this.#sql
      .exec<{ events: string }>(`SELECT events FROM webhook_outbox WHERE row BETWEEN ? AND ? ORDER BY row`, first.row, lastRow)
      .toArray()
      .map((r) => r.events);
    return { lastRow, rows: end, count: events, events: texts.join(",") };
  }

  /** Rows up to `lastRow` are in a request (0: none is). */
  sending(lastRow: number): void {
    this.#sendingThrough = lastRow;
  }

  /** The receiver acknowledged every row up to `lastRow`. Returns the events and the rows written deleting them. */
  delivered(lastRow: number): { events: number; rowsWritten: number } {
    let events = 0;
    let rows = 0;
    while (rows < this.#rows.length && (this.#rows[rows] as OutboxRow).row <= lastRow) events += (this.#rows[rows++] as OutboxRow).count;
    if (rows === 0) return { events: 0, rowsWritten: 0 };
    const rowsWritten = rowsWrittenBy(this.#sql, `DELETE FROM webhook_outbox WHERE row <= ?`, lastRow);
    this.#rows.splice(0, rows);
    this.#pendingEvents -= events;
    return { events, rowsWritten };
  }

  /** Takes the oldest row out (it becomes dead letters). */
  takeOldest(): TakenRow | null {
    const oldest = this.#rows[0];
    if (!oldest) return null;
    const stored = this.#sql.exec<{ events: string }>(`SELECT events FROM webhook_outbox WHERE row = ?`, oldest.row).toArray()[0];
    const rowsWritten = rowsWrittenBy(this.#sql, `DELETE FROM webhook_outbox WHERE row = ?`, oldest.row);
    this.#rows.shift();
    this.#pendingEvents -= oldest.count;
    return { count: oldest.count, events: stored?.events ?? "", rowsWritten };
  }

  /** After the room gave its storage back (deleteAll). */
  reset(): void {
    this.#exists = false;
    this.#rows = [];
    this.#pendingEvents = 0;
  }

  #fits(count: number, bytes: number, event: OutboxEvent): boolean {
    return count < this.#rowMaxEvents && bytes + 1 + event.bytes <= OUTBOX_ROW_MAX_BYTES;
  }

  #ensureTable(): number {
    if (this.#exists) return 0;
    this.#exists = true;
    // `row` is the rowid: a row written is one row, with no index beside it.
    return rowsWrittenBy(
      this.#sql,
      `CREATE TABLE IF NOT EXISTS webhook_outbox (
        row INTEGER PRIMARY KEY, opened INTEGER NOT NULL, closed INTEGER NOT NULL,
        count INTEGER NOT NULL, bytes INTEGER NOT NULL, events TEXT NOT NULL)`,
    );
  }
}
