import { runOf, type BatchLimits } from "../engine/frames";
import type { Message } from "../engine/message";
import type { MessageSource, SourceRead } from "../engine/stream";
import type { LostRange } from "./contracts";

export interface RingBounds {
  /** Messages kept (HISTORY_MAX_MESSAGES: as far back as the root's history reaches). */
  maxMessages: number;
  /** Bytes kept in all: the live part takes what the backfill's share leaves. */
  maxBytes: number;
  /** Bytes of that kept for one backfill (at least what one fetch brings). */
  backfillBytes: number;
}

/**
 * A leaf's recent messages, in memory: what its sockets catch up from and
 * resume from, so that a reconnect storm is served by the leaves instead of
 * landing on the root. It is the leaf's `MessageSource` for the delivery
 * engine, as the SQLite history is the root's.
 *
 * - The live part is contiguous and ends at `seq`, the last message pushed
 *   by the root; it is bounded by message count and by `maxBytes` less the
 *   backfill's share (the oldest go).
 * - Below it, one backfill of at most `backfillBytes`: a contiguous run fetched from the root's history
 *   when a socket needed something older (a resume, or a socket behind for
 *   longer than the live part reaches). A socket that needs a message the
 *   ring does not hold is reported through `onMiss`; the leaf fetches it and
 *   resumes catch-up. The ring never claims a message lost on its own: only
 *   what the root's history reported lost (`lostThrough`) is.
 *
 * So the ring holds at most `maxBytes` (plus one message, when a single
 * message is larger than its part). Nothing here is stored: a leaf that
 * restarts starts with an empty ring and fills it from pushes and backfills.
 */
export class MessageRing implements MessageSource {
  readonly #bounds: RingBounds;
  readonly #onMiss: (from: number) => void;
  #live: Message[] = [];
  #head = 0;
  #liveBytes = 0;
  #older: Message[] = [];
  #olderBytes = 0;
  #seq = 0;
  #lostThrough = 0;

  constructor(bounds: RingBounds, onMiss: (from: number) => void) {
    const backfillBytes = Math.max(1, Math.min(bounds.backfillBytes, bounds.maxBytes - 1));
    this.#bounds = { maxMessages: Math.max(1, bounds.maxMessages), maxBytes: Math.max(2, bounds.maxBytes), backfillBytes };
    this.#onMiss = onMiss;
  }

  /** The latest seq this leaf holds: its sockets are level here. */
  get seq(): number {
    return this.#seq;
  }

  /** Messages and bytes held (live and backfill). */
  get size(): { messages: number; bytes: number } {
    return { messages: this.#live.length - this.#head + this.#older.length, bytes: this.#liveBytes + this.#olderBytes };
  }

  /** Starts over, level with the room at `seq`, holding nothing. */
  reset(seq: number): void {
    this.#live = [];
    this.#head = 0;
    this.#liveBytes = 0;
    this.#older = [];
    this.#olderBytes = 0;
    this.#seq = seq;
    this.#lostThrough = 0;
  }

  /** Appends messages that follow `seq` directly (the caller checked); the oldest go past the bounds. */
  append(messages: readonly Message[]): void {
    for (const message of messages) {
      this.#live.push(message);
      this.#liveBytes += message.bytes;
      this.#seq = message.seq;
    }
    const { maxMessages, maxBytes, backfillBytes } = this.#bounds;
    const liveBytes = maxBytes - backfillBytes;
    while (this.#live.length - this.#head > maxMessages || (this.#liveBytes > liveBytes && this.#live.length - this.#head > 1)) {
      this.#liveBytes -= (this.#live[this.#head] as Message).bytes;
      this.#head += 1;
    }
    if (this.#head > 1024 && this.#head * 2 > this.#live.length) {
      this.#live = this.#live.slice(this.#head);
      this.#head = 0;
    }
  }

  /** The room's history no longer holds seqs up to `to`, and the leaf moves past them. */
  skipLost(to: number): void {
    this.#lostThrough = Math.max(this.#lostThrough, to);
    if (to > this.#seq) {
      // Nothing held is contiguous with what comes next.
      this.#live = [];
      this.#head = 0;
      this.#liveBytes = 0;
      this.#seq = to;
    }
  }

  /**
   * Keeps messages fetched from the root's history (consecutive seqs), and
   * what it reported lost, for the sockets that asked for them. Only what is
   * older than the live part is kept; a backfill that touches the previous one
   * extends it, any other replaces it.
   */
  backfill(messages: readonly Message[], lost: LostRange | null): void {
    if (lost) this.#lostThrough = Math.max(this.#lostThrough, Math.min(lost.to, this.#seq));
    const liveFirst = this.#liveFirst();
    const kept = messages.filter((m) => m.seq < liveFirst && m.seq > this.#lostThrough);
    if (kept.length === 0) return;
    const first = (kept[0] as Message).seq;
    const last = (kept[kept.length - 1] as Message).seq;
    const olderFirst = this.#older[0]?.seq;
    const olderLast = this.#older[this.#older.length - 1]?.seq;
    let merged: Message[];
    if (olderFirst !== undefined && olderLast !== undefined && last + 1 >= olderFirst && first <= olderLast + 1) {
      const before = this.#older.filter((m) => m.seq < first);
      const after = this.#older.filter((m) => m.seq > last);
      merged = [...before, ...kept, ...after];
    } else {
      merged = kept;
    }
    let bytes = merged.reduce((sum, m) => sum + m.bytes, 0);
    // Past the bound something goes, but never what was just fetched for: the sockets that asked
    // need its first message. A backfill that extends the previous one forward drops the oldest
    // (catch-up moves towards the live part); a new one, or one that reaches further back, drops
    // the newest (what the previous backfill or a later fetch holds again).
    const forward = olderFirst !== undefined && first > olderFirst;
    let start = 0;
    let end = merged.length;
    while (bytes > this.#bounds.backfillBytes && end - start > 1) {
      if (forward && (merged[start] as Message).seq < first) {
        bytes -= (merged[start] as Message).bytes;
        start += 1;
      } else {
        end -= 1;
        bytes -= (merged[end] as Message).bytes;
      }
    }
    this.#older = start > 0 || end < merged.length ? merged.slice(start, end) : merged;
    this.#olderBytes = bytes;
  }

  /** Message `seq`, when the ring holds it. */
  get(seq: number): Message | undefined {
    return this.#find(seq);
  }

  /** Whether seq `from` can be served now (held, or known lost), without asking the root. */
  covers(from: number): boolean {
    return from > this.#seq || from <= this.#lostThrough || this.#find(from) !== undefined;
  }

  /**
   * Reads messages from `from` on, as History.read does: runs that each fit a
   * frame, until `budget` bytes are taken or `seq` is reached, and what the
   * root's history no longer holds as `lost`. A message the ring does not
   * hold ends the read early and is reported through `onMiss`.
   */
  read(from: number, budget: number, _limits: BatchLimits, _hintRow = 0, _now = 0): SourceRead {
    const result: SourceRead = { runs: [], lost: null, nextSeq: from, nextRow: 0, rowsRead: 0 };
    let taken = 0;
    while (from <= this.#seq && taken < budget) {
      if (from <= this.#lostThrough) {
        const to = Math.min(this.#lostThrough, this.#seq);
        result.lost = result.lost === null ? { from, to } : { from: result.lost.from, to };
        from = to + 1;
        continue;
      }
      const message = this.#find(from);
      if (message === undefined) {
        this.#onMiss(from);
        break;
      }
      result.runs.push(runOf(message));
      taken += message.bytes;
      from += 1;
    }
    result.nextSeq = from;
    return result;
  }

  #liveFirst(): number {
    return this.#seq - (this.#live.length - this.#head) + 1;
  }

  #find(seq: number): Message | undefined {
    const liveFirst = this.#liveFirst();
    if (seq >= liveFirst && seq <= this.#seq) return this.#live[this.#head + seq - liveFirst];
    const olderFirst = this.#older[0]?.seq;
    if (olderFirst !== undefined && seq >= olderFirst) return this.#older[seq - olderFirst];
    return undefined;
  }
}
