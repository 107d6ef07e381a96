import type { BatchLimits } from "../../engine/frames";
import type { Message } from "../../engine/message";
import type { MessageSource, SourceRead } from "../../engine/stream";

/**
 * What a room's publish path, idempotency keys, history pages and leaves
 * need of its history, wherever it keeps it: the SQLite ring of rows
 * (History, history.ts) or, for an ephemeral room (a HISTORY_RULES rule
 * with `"store": false`), a ring in memory (MemoryHistory, memory-history.ts).
 *
 * A "row" is where the history keeps a flush: a SQLite row of the ring, or,
 * in memory, one message (row = seq). Row numbers only ever grow, and are
 * hints and positions for the callers, never seqs.
 */
export interface RoomHistory extends MessageSource {
  /** Whether messages are written to storage (rows billed), or only kept in memory. */
  readonly durable: boolean;
  /** Latest seq of the room (0 before the first message). */
  readonly seq: number;
  /** When the newest message was published (0 when there is none). */
  readonly latestTs: number;
  /** The identity of this history: seqs of another epoch mean other messages. */
  readonly epoch: string;
  /** Whether the history holds messages a page can be served from (for the SQLite ring: whether it stored any). */
  readonly exists: boolean;
  /** The newest row written (0 before the first). */
  readonly latestRow: number;
  /** The epoch, to hand to a client (a durable history stores it from now on). */
  issueEpoch(): string;
  /** After the room gave its storage back: the next message starts a new history, under a new epoch. */
  reset(): void;
  /**
   * Keeps one flush's messages (consecutive seqs), with whatever `alongside`
   * writes (in the same transaction when the history is durable) and each
   * message's publish-key entry (`keyOf`). Returns the rows they went to,
   * oldest first. Nothing changes when it throws.
   */
  append(messages: readonly Message[], ts: number, alongside?: () => void, keyOf?: (seq: number) => string | undefined): HistoryRowSpan[];
  read(from: number, budget: number, limits: BatchLimits, hintRow?: number, now?: number): SourceRead;
  /** Oldest seq still within the bounds, or null when the history is empty. */
  oldest(now?: number): number | null;
  /** Whether row `row`, written at `ts`, still holds what was written there (a publish key's reach). */
  keeps(row: number, ts: number, now?: number): boolean;
  /** The row that holds `seq`, or the oldest row kept when `seq` is older than all of them; 0 when there is none. */
  rowOf(seq: number, counter: { rowsRead: number }): number;
  /** The oldest row still within the bounds and its first seq, or null when none is. */
  firstKeptRow(counter: { rowsRead: number }, now?: number): { row: number; first: number } | null;
  /** Up to `count` kept rows from `fromRow` on (forward) or back from it (backward), with their messages' event texts. */
  keptRows(fromRow: number, direction: "forward" | "backward", count: number, counter: { rowsRead: number }, now?: number): StoredRow[];
  /** The rows written at or after `since` (ms) and still kept that carry publish keys, oldest first (what keys are rebuilt from on waking). */
  keyedRows(since: number, counter: { rowsRead: number }, now?: number): KeyedRow[];
  /** The kept rows from `fromRow` to `toRow` whose publish keys contain `text`, oldest first (where a key memory no longer holds is looked up). */
  keyedRowsContaining(text: string, fromRow: number, toRow: number, counter: { rowsRead: number }): KeyedRow[];
}

/** The rows one flush went to, each with its first and last seq. */
export interface HistoryRowSpan {
  row: number;
  first: number;
  last: number;
}

/** A row as a history page reads it: its seqs, when it was written, and each message's event text. */
export interface StoredRow {
  row: number;
  first: number;
  last: number;
  ts: number;
  events: string[];
}

/** A row's publish-key entries (publish-keys.ts), each with its message's seq. */
export interface KeyedRow {
  row: number;
  ts: number;
  entries: { seq: number; entry: string }[];
}
