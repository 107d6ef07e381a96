import { rowsWrittenBy, tableExists } from "../storage/sql-writes";

/** The record's entry for the room itself: no member id is empty (docs/protocol.md#presence). */
const ROOM = "";

/**
 * What the receiver has been told and not yet told otherwise, kept so that a
 * restart cannot break the pairs: every member announced as joined and not
 * yet as left, and whether the room was announced as occupied and not yet as
 * vacated (table `webhook_record`, one row each, id only; the room is the
 * empty id).
 *
 * Presence lives in memory and a restart (a deploy, a crash) loses it with
 * the sockets. What was announced is therefore recorded here, in the same
 * transaction as the events that announce it (WebhookRecorder), so the room
 * that starts again knows whom it still owes a `member.left` and whether it
 * owes a `room.vacated`, and a member who comes back is not announced twice.
 * Memory holds the whole record (read when the room starts: one row read per
 * member); changes are written by the recorder, only the last change of each
 * id in a turn, so a member who joins and leaves within one turn costs nothing.
 */
export class WebhookRecord {
  readonly #sql: SqlStorage;
  readonly #ids = new Set<string>();
  /** Changes not yet written: id -> whether it is in the record. */
  readonly #changes = new Map<string, boolean>();
  #exists: boolean;

  constructor(sql: SqlStorage) {
    this.#sql = sql;
    this.#exists = tableExists(sql, "webhook_record");
    if (this.#exists) for (const { id } of sql.exec<{ id: string }>(`SELECT id FROM webhook_record`)) this.#ids.add(id);
  }

  get exists(): boolean {
    return this.#exists;
  }

  /** Members in the record (announced as joined, not yet as left). */
  get members(): number {
    return this.#ids.size - (this.#ids.has(ROOM) ? 1 : 0);
  }

  /** Every member id in the record. */
  memberIds(): string[] {
    return [...this.#ids].filter((id) => id !== ROOM);
  }

  hasMember(id: string): boolean {
    return id !== ROOM && this.#ids.has(id);
  }

  get occupied(): boolean {
    return this.#ids.has(ROOM);
  }

  addMember(id: string): void {
    this.#set(id, true);
  }

  removeMember(id: string): void {
    this.#set(id, false);
  }

  setOccupied(occupied: boolean): void {
    this.#set(ROOM, occupied);
  }

  /** Whether changes wait to be written. */
  get dirty(): boolean {
    return this.#changes.size > 0;
  }

  /** Writes the changes since the last write; call inside the recorder's transaction. Returns the rows written. */
  write(): number {
    if (this.#changes.size === 0) return 0;
    let written = 0;
    if (!this.#exists) {
      // WITHOUT ROWID: the id is the table's only key, so a row written is one row.
      written += rowsWrittenBy(this.#sql, `CREATE TABLE IF NOT EXISTS webhook_record (id TEXT PRIMARY KEY) WITHOUT ROWID`);
      this.#exists = true;
    }
    for (const [id, present] of this.#changes) {
      written += present
        ? rowsWrittenBy(this.#sql, `INSERT OR IGNORE INTO webhook_record (id) VALUES (?)`, id)
        : rowsWrittenBy(this.#sql, `DELETE FROM webhook_record WHERE id = ?`, id);
    }
    return written;
  }

  /** The write committed: the changes are in storage. */
  written(): void {
    this.#changes.clear();
  }

  /** The write rolled back: storage does not have them; `exists` is asked again. */
  writeFailed(): void {
    this.#exists = tableExists(this.#sql, "webhook_record");
  }

  /** After the room gave its storage back (deleteAll). */
  reset(): void {
    this.#exists = false;
    this.#ids.clear();
    this.#changes.clear();
  }

  #set(id: string, present: boolean): void {
    if (present) this.#ids.add(id);
    else this.#ids.delete(id);
    this.#changes.set(id, present);
  }
}
