import { EPOCH_PATTERN } from "../protocol";

/**
 * The `cursor` of a history page (GET /rooms/{room}/messages): where the next
 * page starts, the other end of the range asked for, the history row that
 * holds the start (so the next page needs no search to find it; a row that
 * does not hold it any more is looked up again), and the epoch the seqs belong
 * to. Written by the room, read back by the edge; opaque to clients.
 *
 * `f<after>.<before>.<row>.<epoch>` pages forward (oldest first) after `after`;
 * `b<before>.<after>.<row>.<epoch>` pages backward (newest first) below
 * `before`. An absent end is empty.
 */
export interface HistoryCursor {
  direction: "forward" | "backward";
  after: number | null;
  before: number | null;
  row: number;
  epoch: string;
}

const CURSOR = /^([fb])(\d{1,15})\.(\d{0,15})\.(\d{1,15})\.([^.]{1,64})$/;

export function encodeHistoryCursor(cursor: HistoryCursor): string {
  const forward = cursor.direction === "forward";
  const position = forward ? cursor.after : cursor.before;
  const bound = forward ? cursor.before : cursor.after;
  return `${forward ? "f" : "b"}${position ?? 0}.${bound ?? ""}.${cursor.row}.${cursor.epoch}`;
}

/** The cursor `text` names, or null when it is not one. */
export function decodeHistoryCursor(text: string): HistoryCursor | null {
  const m = CURSOR.exec(text);
  if (!m) return null;
  const [, kind, position, bound, row, epoch] = m as unknown as [string, string, string, string, string, string];
  if (!EPOCH_PATTERN.test(epoch)) return null;
  const forward = kind === "f";
  const end = bound === "" ? null : Number(bound);
  return {
    direction: forward ? "forward" : "backward",
    after: forward ? Number(position) : end,
    before: forward ? end : Number(position),
    row: Number(row),
    epoch,
  };
}
