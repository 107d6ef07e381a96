import { EPOCH_PATTERN, SINCE_PATTERN } from "../protocol";
import { decodeHistoryCursor } from "../common/history-cursor";
import type { PageQuery } from "../durable-objects/room/storage/history-pages";

/** Messages per page of `GET /rooms/{room}/messages` when `limit` is not given, and the most one page holds. */
export const HISTORY_PAGE_DEFAULT = 100;
export const HISTORY_PAGE_MAX = 1000;

export type HistoryQuery = { ok: true; value: PageQuery } | { ok: false; message: string };

export interface HistoryParams {
  after?: string;
  before?: string;
  limit?: string;
  direction?: string;
  cursor?: string;
  epoch?: string;
}

/**
 * Validates the query of `GET /rooms/{room}/messages`: `after` and `before`
 * (seqs, exclusive), `limit` (1-1000, default 100), `direction` (`forward`
 * or `backward`; by default forward when `after` is given, else newest
 * first), `epoch`, or a previous page's `cursor` (with `limit` only).
 */
export function parseHistoryQuery(params: HistoryParams): HistoryQuery {
  let limit = HISTORY_PAGE_DEFAULT;
  if (params.limit !== undefined) {
    limit = Number(params.limit);
    if (!/^\d{1,4}$/.test(params.limit) || limit < 1 || limit > HISTORY_PAGE_MAX) {
      return { ok: false, message: `limit must be a whole number from 1 to ${HISTORY_PAGE_MAX}` };
    }
  }
  if (params.epoch !== undefined && !EPOCH_PATTERN.test(params.epoch)) return { ok: false, message: "epoch must be the epoch of a welcome event or a history page" };
  if (params.cursor !== undefined) {
    if (params.after !== undefined || params.before !== undefined || params.direction !== undefined) {
      return { ok: false, message: "a cursor carries its range and direction: pass it with limit only" };
    }
    const cursor = decodeHistoryCursor(params.cursor);
    if (cursor === null) return { ok: false, message: "cursor must be the cursor of a previous page" };
    if (params.epoch !== undefined && params.epoch !== cursor.epoch) return { ok: false, message: "the cursor belongs to another epoch than epoch" };
    return { ok: true, value: { direction: cursor.direction, after: cursor.after, before: cursor.before, limit, rowHint: cursor.row, epoch: cursor.epoch } };
  }
  const after = seqParam(params.after);
  const before = seqParam(params.before);
  if (after === undefined) return { ok: false, message: "after must be a seq (a non-negative integer)" };
  if (before === undefined) return { ok: false, message: "before must be a seq (a non-negative integer)" };
  if (after !== null && before !== null && after >= before) return { ok: false, message: "after must be below before" };
  const direction = params.direction ?? (after !== null ? "forward" : "backward");
  if (direction !== "forward" && direction !== "backward") return { ok: false, message: "direction must be forward or backward" };
  return { ok: true, value: { direction, after, before, limit, rowHint: 0, epoch: params.epoch ?? null } };
}

/** A seq parameter: null when absent, undefined when it is not a seq. */
function seqParam(value: string | undefined): number | null | undefined {
  if (value === undefined) return null;
  return SINCE_PATTERN.test(value) ? Number(value) : undefined;
}
