/**
 * Where a history ring's rows sit in the `log` table, and moving them when the
 * room's ring size changes (HISTORY_MAX_MESSAGES or the room's HISTORY_RULES
 * rule).
 *
 * Row r of a ring of `size` slots is in slot r mod size, so a ring read with
 * another size than it was written with finds the wrong rows: its newest row,
 * and with it the room's seq, would be misread, and seqs handed out again.
 * The layout needs no record of its own: rows are numbered from 1 and never
 * deleted, so until the first lap ends slot 0 is empty and every row sits in
 * the slot of its number (any larger size reads them right), and once slot 0
 * is written every slot is, and the size is the highest slot plus one.
 *
 * A room whose ring does not fit its size any more re-maps it once, when it
 * wakes: the rows still within the new bounds (and always the newest, which
 * holds the room's seq) are renumbered from 1 into a table of the new size,
 * which replaces the old one. That costs one row written per row carried, and
 * one read per row of the old ring; a room whose history aged out carries one.
 */

/** A ring as stored: the size it was written with, or null while its first lap is not over (any size above `highestSlot` fits). */
export interface StoredRing {
  size: number | null;
  highestSlot: number;
}

export const LOG_COLUMNS = "slot, row, first, last, ts, bytes, lengths, sizes, events, keys";

export function createLogTable(sql: SqlStorage, name: string): void {
  sql.exec(`CREATE TABLE IF NOT EXISTS ${name} (
    slot INTEGER PRIMARY KEY, row INTEGER NOT NULL, first INTEGER NOT NULL, last INTEGER NOT NULL,
    ts INTEGER NOT NULL, bytes INTEGER NOT NULL, lengths TEXT NOT NULL, sizes TEXT NOT NULL, events TEXT NOT NULL,
    keys TEXT NOT NULL DEFAULT '')`);
}

/** Whether the log table has the `keys` column (tables written before idempotency keys lived in rows do not). */
export function hasKeysColumn(sql: SqlStorage): boolean {
  const schema = sql.exec<{ sql: string }>(`SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'log'`).toArray()[0]?.sql ?? "";
  return /\bkeys\b/.test(schema);
}

/** How the stored ring is laid out, or null when it holds no row. Two point reads. */
export function storedRing(sql: SqlStorage): StoredRing | null {
  const highest = sql.exec<{ slot: number | null }>(`SELECT max(slot) AS slot FROM log`).one().slot;
  if (highest === null) return null;
  const lapped = sql.exec(`SELECT slot FROM log WHERE slot = 0`).toArray().length > 0;
  return { size: lapped ? highest + 1 : null, highestSlot: highest };
}

/** Whether a ring of `size` slots reads `stored` right. */
export function fitsSize(stored: StoredRing, size: number): boolean {
  return stored.size === null ? stored.highestSlot < size : stored.size === size;
}

/**
 * The newest row of a ring of `size` slots that it fits, by binary search
 * (a full scan would read every row at each wake-up). Slot s holds row
 * s + k·size for the lap k it was last written in; the newest row is where
 * laps change. 0 for an empty ring.
 */
export function newestRow(sql: SqlStorage, size: number): number {
  const rowAt = (slot: number): number => sql.exec<{ row: number }>(`SELECT row FROM log WHERE slot = ?`, slot).toArray()[0]?.row ?? 0;
  const zero = rowAt(0);
  // Slots written after slot 0 in its lap hold zero + slot (or slot itself before the first lap ends).
  let lo = 0;
  let hi = size - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (rowAt(mid) === zero + mid) lo = mid;
    else hi = mid - 1;
  }
  return lo === 0 ? zero : zero + lo;
}

/**
 * Re-maps the stored ring into one of `size` slots: carries the newest rows up
 * to `size` of them, those at or after `keptSince` (ms) and always the newest
 * one, renumbered from 1 in order. Run inside a transaction. Returns the
 * rows carried.
 */
export function remapRing(sql: SqlStorage, stored: StoredRing, size: number, keptSince: number, keysColumn: boolean): number {
  const latest = newestRow(sql, stored.size ?? stored.highestSlot + 1);
  const floor = latest - size;
  // Rows are in time order, so those within the age bound are the newest ones: from the first of them on.
  const firstKept = sql.exec<{ row: number | null }>(`SELECT min(row) AS row FROM log WHERE row > ? AND ts >= ?`, floor, keptSince).one().row ?? latest;
  const base = Math.min(firstKept, latest) - 1;
  createLogTable(sql, "log_remapped");
  sql.exec(
    `INSERT INTO log_remapped (${LOG_COLUMNS})
     SELECT (row - ?1) % ?2, row - ?1, first, last, ts, bytes, lengths, sizes, events, ${keysColumn ? "keys" : "''"} FROM log WHERE row > ?1 AND row <= ?3`,
    base,
    size,
    latest,
  );
  sql.exec(`DROP TABLE log`);
  sql.exec(`ALTER TABLE log_remapped RENAME TO log`);
  return latest - base;
}
