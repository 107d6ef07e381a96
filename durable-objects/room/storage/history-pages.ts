import { encodeHistoryCursor } from "../../../common/history-cursor";
import type { RoomHistory, StoredRow } from "./room-history";

/**
 * A page of a room's history for `GET /rooms/{room}/messages`
 * (docs/history.md): the messages of a seq range, oldest first (forward) or
 * newest first (backward), at most `limit` of them and about PAGE_MAX_BYTES of
 * their text, with a cursor for the next page and what the range asks for that
 * history no longer holds.
 *
 * Rows are read whole, as catch-up reads them: a row holds one flush's
 * messages, so a page of 100 messages published one per flush reads 100 rows,
 * and fewer when flushes coalesced. Rows are read in range reads of up to
 * ROWS_PER_READ slots; the row a page starts at comes from the cursor (checked
 * against what it holds) or from the room's index of the rows this instance
 * wrote, else a binary search (about log2 of the ring's slots). The answer is
 * built as text from the stored events, never parsing the messages' data.
 * Nothing here writes: reading a room creates no storage.
 */

/** Most message text one page carries (a message of up to MAX_MESSAGE_BYTES always fits one page). */
export const PAGE_MAX_BYTES = 1024 * 1024;
/** Rows read per range read. */
const ROWS_PER_READ = 64;

export interface PageQuery {
  direction: "forward" | "backward";
  /** Messages after this seq (exclusive), or from the oldest. */
  after: number | null;
  /** Messages before this seq (exclusive), or up to the newest. */
  before: number | null;
  limit: number;
  /** The row a previous page says the range continues in (0: unknown). */
  rowHint: number;
  /** The epoch the caller's seqs belong to, when it has one. */
  epoch: string | null;
}

export type PageAnswer =
  | { ok: true; body: string; rowsRead: number }
  | { ok: false; status: 404 | 409; error: "not_found" | "conflict"; message: string };

interface Collected {
  items: string[];
  last: number;
  /** The page is full: where the next one continues. */
  nextRow: number | null;
  lost: { from: number; to: number } | null;
}

export function historyPage(history: RoomHistory, room: string, query: PageQuery, now = Date.now()): PageAnswer {
  if (!history.exists) return { ok: false, status: 404, error: "not_found", message: "no such room: it holds no history" };
  if (query.epoch !== null && query.epoch !== history.epoch) {
    return { ok: false, status: 409, error: "conflict", message: `the room's history started over: its epoch is now ${history.epoch}` };
  }
  const counter = { rowsRead: 0 };
  const forward = query.direction === "forward";
  const collected = forward ? forwardPage(history, query, counter, now) : backwardPage(history, query, counter, now);
  const cursor =
    collected.nextRow === null
      ? null
      : encodeHistoryCursor({
          direction: query.direction,
          after: forward ? collected.last : query.after,
          before: forward ? query.before : collected.last,
          row: collected.nextRow,
          epoch: history.epoch,
        });
  const body =
    `{"room":${JSON.stringify(room)},"epoch":${JSON.stringify(history.epoch)},"direction":"${query.direction}",` +
    `"messages":[${collected.items.join(",")}],"cursor":${cursor === null ? "null" : JSON.stringify(cursor)},` +
    `"lost":${collected.lost === null ? "null" : JSON.stringify(collected.lost)},"rowsRead":${counter.rowsRead}}`;
  return { ok: true, body, rowsRead: counter.rowsRead };
}

function forwardPage(history: RoomHistory, query: PageQuery, counter: { rowsRead: number }, now: number): Collected {
  const latest = history.seq;
  const from = (query.after ?? 0) + 1;
  const end = Math.min(query.before === null ? latest : query.before - 1, latest);
  const result: Collected = { items: [], last: from - 1, nextRow: null, lost: null };
  if (from > end) return result;
  let start = from;
  let row = query.rowHint > 0 ? query.rowHint : history.rowOf(start, counter);
  let wanted = rowsWanted(query.limit, 0);
  let rows = history.keptRows(row, "forward", wanted, counter, now);
  if (query.rowHint > 0 && !holds(rows[0], start)) {
    // The ring moved on since the cursor was made: look the row up.
    row = history.rowOf(start, counter);
    rows = history.keptRows(row, "forward", wanted, counter, now);
  }
  if (!holds(rows[0], start)) {
    // History no longer holds `start`: the range continues at the oldest message it keeps.
    const kept = history.firstKeptRow(counter, now);
    if (kept === null || kept.first <= start) {
      result.lost = { from, to: end };
      return result;
    }
    result.lost = { from, to: Math.min(end, kept.first - 1) };
    start = kept.first;
    row = kept.row;
    rows = history.keptRows(row, "forward", wanted, counter, now);
  }
  let bytes = 0;
  while (rows.length > 0) {
    for (const stored of rows) {
      for (let i = 0; i < stored.events.length; i++) {
        const seq = stored.first + i;
        if (seq < start) continue;
        if (seq > end) return result;
        const event = stored.events[i] as string;
        if (result.items.length >= query.limit || (result.items.length > 0 && bytes + event.length > PAGE_MAX_BYTES)) {
          result.nextRow = stored.row;
          return result;
        }
        result.items.push(pageItem(event, seq));
        bytes += event.length;
        result.last = seq;
      }
      row = stored.row + 1;
    }
    if (rows.length < wanted) break;
    wanted = rowsWanted(query.limit, result.items.length);
    rows = history.keptRows(row, "forward", wanted, counter, now);
  }
  return result;
}

function backwardPage(history: RoomHistory, query: PageQuery, counter: { rowsRead: number }, now: number): Collected {
  const latest = history.seq;
  const top = Math.min(query.before === null ? latest : query.before - 1, latest);
  const low = (query.after ?? 0) + 1;
  const result: Collected = { items: [], last: top + 1, nextRow: null, lost: null };
  if (top < low) return result;
  let row = query.rowHint > 0 ? query.rowHint : history.rowOf(top, counter);
  let wanted = rowsWanted(query.limit, 0);
  let rows = history.keptRows(row, "backward", wanted, counter, now);
  if (query.rowHint > 0 && !holds(rows[0], top)) {
    row = history.rowOf(top, counter);
    rows = history.keptRows(row, "backward", wanted, counter, now);
  }
  let bytes = 0;
  // The first seq of the oldest kept row seen: below it, history holds nothing more.
  let oldestSeen = top + 1;
  while (rows.length > 0) {
    for (const stored of rows) {
      for (let i = stored.events.length - 1; i >= 0; i--) {
        const seq = stored.first + i;
        if (seq > top) continue;
        if (seq < low) return result;
        const event = stored.events[i] as string;
        if (result.items.length >= query.limit || (result.items.length > 0 && bytes + event.length > PAGE_MAX_BYTES)) {
          result.nextRow = stored.row;
          return result;
        }
        result.items.push(pageItem(event, seq));
        bytes += event.length;
        result.last = seq;
      }
      oldestSeen = Math.min(oldestSeen, stored.first);
      row = stored.row - 1;
    }
    if (rows.length < wanted || row < 1) break;
    wanted = rowsWanted(query.limit, result.items.length);
    rows = history.keptRows(row, "backward", wanted, counter, now);
  }
  // The range reaches below the oldest message history keeps.
  if (low < oldestSeen) result.lost = { from: low, to: Math.min(top, oldestSeen - 1) };
  return result;
}

/**
 * Rows to read next: a row holds at least one message, so no more than the
 * messages the page still takes, plus one to see whether the range goes on.
 */
function rowsWanted(limit: number, taken: number): number {
  return Math.min(ROWS_PER_READ, limit - taken + 1);
}

function holds(row: StoredRow | undefined, seq: number): boolean {
  return row !== undefined && row.first <= seq && seq <= row.last;
}

/**
 * `{"seq","ts","data"}` cut from a stored event (engine/message.ts writes
 * `{"type":"message","seq":…,"data":…,"ts":…,"tag":…}`): the data is the
 * text between its field and `ts`, which only numbers follow.
 */
function pageItem(event: string, seq: number): string {
  const dataAt = event.indexOf(',"data":') + 8;
  const tsAt = event.lastIndexOf(',"ts":');
  const tagAt = event.lastIndexOf(',"tag":');
  return `{"seq":${seq},"ts":${event.slice(tsAt + 6, tagAt)},"data":${event.slice(dataAt, tsAt)}}`;
}
