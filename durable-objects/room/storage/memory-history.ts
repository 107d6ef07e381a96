import type { BatchLimits } from "../../engine/frames";
import type { Message } from "../../engine/message";
import type { StreamMark } from "../../engine/socket-mark";
import type { SourceRead } from "../../engine/stream";
import { MessageRing } from "../../followers/ring";
import type { HistoryRowSpan, KeyedRow, RoomHistory, StoredRow } from "./room-history";

export interface MemoryBounds {
  /** Messages kept (the room's maxMessages). */
  maxMessages: number;
  /** Messages older than this are not served (the room's maxAgeSeconds, in ms). */
  maxAgeMs: number;
  /** Bytes of message events kept at most: the oldest go first. */
  maxBytes: number;
}

/** When a flush was kept: its seqs and its publish time (all its messages share it). */
interface Flush {
  first: number;
  last: number;
  ts: number;
}

/**
 * The history of an ephemeral room (a HISTORY_RULES rule with
 * `"store": false`): the room's seq, its epoch and its recent messages, all
 * in memory, so no row is written per message. Resume and catch-up read it
 * exactly as they read the SQLite ring while the object lives; the messages
 * themselves sit in the same ring a leaf keeps of its room (leaf/ring.ts),
 * bounded by the room's maxMessages and by `maxBytes`, and what is older
 * than the room's age bound is not served.
 *
 * What survives what (docs/history.md#ephemeral-rooms):
 * - Hibernation: the room's seq and epoch, from the mark its sockets' attachments
 *   carry (engine/socket-mark.ts), so its sockets carry on; the messages do
 *   not, and a resume from before the room woke is told `lost` (history).
 * - A restart or an eviction without sockets of its own: nothing. The room
 *   starts a new epoch at seq 0, and a client that resumes is told `lost`
 *   (epoch), as after a room gave its storage back.
 *
 * A row is one message here (row = seq): what the publish path, the keys and
 * history pages call rows are only positions.
 */
export class MemoryHistory implements RoomHistory {
  /** Nothing is written: every message lives in memory only. */
  readonly durable = false;
  readonly #bounds: MemoryBounds;
  readonly #ring: MessageRing;
  /** The kept messages' flushes, oldest first, from `#head` on. */
  #flushes: Flush[] = [];
  #head = 0;
  #latestTs = 0;
  #epoch: string;

  /** `mark`: where the room stood when it hibernated (its sockets carry it), or null for a new history. */
  constructor(bounds: MemoryBounds, mark: StreamMark | null) {
    this.#bounds = bounds;
    // The ring keeps the live path only: a room is its own source, nothing is fetched into it.
    this.#ring = new MessageRing({ maxMessages: bounds.maxMessages, maxBytes: bounds.maxBytes + 1, backfillBytes: 1 }, () => {});
    this.#epoch = mark?.epoch ?? crypto.randomUUID();
    this.#ring.reset(mark?.seq ?? 0);
  }

  get seq(): number {
    return this.#ring.seq;
  }

  get latestTs(): number {
    return this.#latestTs;
  }

  get epoch(): string {
    return this.#epoch;
  }

  /** Whether this history has a seq to speak of (a page of a room that never published here is a 404). */
  get exists(): boolean {
    return this.#ring.seq > 0;
  }

  get latestRow(): number {
    return this.#ring.seq;
  }

  /** Nothing to store: the epoch lives as long as the history does. */
  issueEpoch(): string {
    return this.#epoch;
  }

  reset(): void {
    this.#ring.reset(0);
    this.#flushes = [];
    this.#head = 0;
    this.#latestTs = 0;
    this.#epoch = crypto.randomUUID();
  }

  /**
   * Keeps a flush's messages. `alongside` (a broadcast's key) is written on
   * its own: the messages are not stored, so there is no transaction to share.
   * Publish keys live in the room's memory (publish-keys.ts), not here.
   */
  append(messages: readonly Message[], ts: number, alongside?: () => void): HistoryRowSpan[] {
    alongside?.();
    const first = messages[0];
    const last = messages[messages.length - 1];
    if (first === undefined || last === undefined) return [];
    this.#ring.append(messages);
    this.#flushes.push({ first: first.seq, last: last.seq, ts });
    this.#latestTs = ts;
    this.#trim();
    return messages.map((m) => ({ row: m.seq, first: m.seq, last: m.seq }));
  }

  read(from: number, budget: number, limits: BatchLimits, _hintRow = 0, now = Date.now()): SourceRead {
    const floor = this.#floor(now);
    const latest = this.#ring.seq;
    if (from >= floor || from > latest) return this.#ring.read(from, budget, limits);
    const lost = { from, to: Math.min(floor - 1, latest) };
    if (floor > latest) return { runs: [], lost, nextSeq: latest + 1, nextRow: 0, rowsRead: 0 };
    return { ...this.#ring.read(floor, budget, limits), lost };
  }

  oldest(now = Date.now()): number | null {
    const floor = this.#floor(now);
    return floor > this.#ring.seq ? null : floor;
  }

  /** A publish key's row is kept as long as the room's memory: its reach is the dedupe window alone. */
  keeps(row: number): boolean {
    return row >= 1 && row <= this.#ring.seq;
  }

  rowOf(seq: number): number {
    if (this.#ring.seq === 0) return 0;
    return Math.min(Math.max(seq, this.#floor(Date.now())), this.#ring.seq);
  }

  firstKeptRow(_counter: { rowsRead: number }, now = Date.now()): { row: number; first: number } | null {
    const floor = this.#floor(now);
    return floor > this.#ring.seq ? null : { row: floor, first: floor };
  }

  keptRows(fromRow: number, direction: "forward" | "backward", count: number, _counter: { rowsRead: number }, now = Date.now()): StoredRow[] {
    const floor = this.#floor(now);
    const latest = this.#ring.seq;
    const rows: StoredRow[] = [];
    const step = direction === "forward" ? 1 : -1;
    for (let seq = direction === "forward" ? Math.max(fromRow, floor) : Math.min(fromRow, latest); rows.length < count && seq >= floor && seq <= latest; seq += step) {
      const message = this.#ring.get(seq);
      if (message === undefined) break;
      rows.push({ row: seq, first: seq, last: seq, ts: this.#tsOf(seq), events: [message.event] });
    }
    return rows;
  }

  /** Keys are never in rows here: the room's memory is all there is of them. */
  keyedRows(): KeyedRow[] {
    return [];
  }

  keyedRowsContaining(): KeyedRow[] {
    return [];
  }

  // -------------------------------------------------------------------------

  /** The oldest seq served: held by the ring and within the age bound (seq + 1 when none is). */
  #floor(now: number): number {
    const held = this.#ring.seq - this.#ring.size.messages + 1;
    const oldestTs = now - this.#bounds.maxAgeMs;
    // Flushes are in time order: the ones that aged out go for good.
    while (this.#head < this.#flushes.length && (this.#flushes[this.#head] as Flush).ts < oldestTs) this.#head += 1;
    this.#compact();
    const young = this.#flushes[this.#head];
    return young === undefined ? this.#ring.seq + 1 : Math.max(held, young.first);
  }

  /** Forgets the flushes whose messages the ring no longer holds. */
  #trim(): void {
    const held = this.#ring.seq - this.#ring.size.messages + 1;
    while (this.#head < this.#flushes.length && (this.#flushes[this.#head] as Flush).last < held) this.#head += 1;
    this.#compact();
  }

  #compact(): void {
    if (this.#head > 1024 && this.#head * 2 > this.#flushes.length) {
      this.#flushes = this.#flushes.slice(this.#head);
      this.#head = 0;
    }
  }

  /** When message `seq` (held) was published. */
  #tsOf(seq: number): number {
    let lo = this.#head;
    let hi = this.#flushes.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if ((this.#flushes[mid] as Flush).first <= seq) lo = mid;
      else hi = mid - 1;
    }
    return this.#flushes[lo]?.ts ?? this.#latestTs;
  }
}
