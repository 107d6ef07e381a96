import { EvictedKeys } from "./evicted-keys";
import type { KeyedRow, RoomHistory } from "./room-history";

/**
 * The idempotency keys a room's publishers sent (HTTP `Idempotency-Key`, a
 * socket publish's `key`), so that a retry is answered with the first
 * publish's seq instead of being published again, across hibernation and
 * restarts.
 *
 * A key costs no row of its own: it is stored in its message's history row
 * (the `keys` column, written in the same statement as the messages), as
 * `<hash>,<space><key>` beside the message's place in the row; `hash` is the
 * data's as sent (common/body-hash.ts), so a retry with another body is told
 * apart (a conflict). In memory the keys are an index rebuilt from the rows
 * when the room first needs it after waking: a binary search for the first
 * row within reach, then one read per row since. So a key is recognised for
 * PUBLISH_DEDUPE_SECONDS, and at most as long as its row is in the room's
 * history (within its age bound, and not yet overwritten by the ring).
 *
 * Keys of HTTP publishers and of sockets are in spaces of their own (`h`,
 * `s`): a socket cannot take a key an HTTP publisher will use. The index
 * holds at most MAX_KEYS_PER_SPACE keys of each space; past it the oldest
 * leave memory, not reach: EvictedKeys (a filter per 65,536 of them) says in
 * which rows such a key may be, and a key missing from the index is looked
 * up there (one range read over those rows). So under a flood of keyed
 * publishes memory does not grow, and a key is still recognised as long as
 * its row is within reach.
 */

/** Whose key it is: an HTTP publisher's (`h`) or a socket's (`s`). */
export type KeySpace = "h" | "s";

/** A keyed publish as the room stores it: the key in its space, and the hash of the data as sent. */
export interface KeyedPublish {
  id: string;
  bodyHash: string;
}

export interface KnownKey {
  seq: number;
  bodyHash: string;
}

/** Keys of one space the index holds (about 300 bytes each, so 15 MB per space at most). */
export const MAX_KEYS_PER_SPACE = 50_000;

interface Indexed extends KnownKey {
  row: number;
  ts: number;
}

/** One space's keys in the order they were stored: the oldest go first. */
class KeyQueue {
  readonly items: { id: string; seq: number; row: number; ts: number }[] = [];
  head = 0;

  get size(): number {
    return this.items.length - this.head;
  }

  push(id: string, entry: Indexed): void {
    this.items.push({ id, seq: entry.seq, row: entry.row, ts: entry.ts });
  }

  compact(): void {
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items.splice(0, this.head);
      this.head = 0;
    }
  }
}

export function keyedPublish(space: KeySpace, key: string, bodyHash: string): KeyedPublish {
  return { id: `${space}${key}`, bodyHash };
}

export class PublishKeys {
  readonly #history: RoomHistory;
  readonly #reachMs: number;
  readonly #rowsRead: (rows: number) => void;
  readonly #byId = new Map<string, Indexed>();
  readonly #queues: Record<KeySpace, KeyQueue> = { h: new KeyQueue(), s: new KeyQueue() };
  /** Keys that left the index for lack of room while their rows are within reach. */
  readonly #evicted = new EvictedKeys();
  #loaded = false;

  /** `reachMs`: PUBLISH_DEDUPE_SECONDS (0: keys are neither kept nor looked up); `rowsRead` counts what rebuilding reads. */
  constructor(history: RoomHistory, reachMs: number, rowsRead: (rows: number) => void) {
    this.#history = history;
    this.#reachMs = reachMs;
    this.#rowsRead = rowsRead;
  }

  get enabled(): boolean {
    return this.#reachMs > 0;
  }

  /** The stored publish of `id`, while it is within reach: from memory, or from its row when it left memory. */
  find(id: string, now = Date.now()): KnownKey | null {
    if (!this.enabled) return null;
    this.#load(now);
    this.#evict(now);
    const found = this.#byId.get(id);
    if (found && this.#reaches(found, now)) return { seq: found.seq, bodyHash: found.bodyHash };
    return this.#findInRows(id, now);
  }

  /** The text stored for a keyed publish in its row's `keys` column (no spaces: keys are visible ASCII). */
  entry(publish: KeyedPublish): string {
    return `${publish.bodyHash},${publish.id}`;
  }

  /** A flush stored these keyed publishes in `rows` at `ts`. */
  stored(publishes: readonly { publish: KeyedPublish; seq: number }[], rows: readonly { row: number; first: number; last: number }[], ts: number): void {
    if (!this.enabled) return;
    if (!this.#loaded) {
      // Before the index is loaded the rows hold them, and loading reads them there. An ephemeral
      // room's history has no rows: its index, in memory from the start, is all there is of its keys.
      if (this.#history.durable) return;
      this.#loaded = true;
    }
    let r = 0;
    for (const { publish, seq } of publishes) {
      while ((rows[r] as { last: number }).last < seq) r += 1;
      this.#add(publish.id, { seq, bodyHash: publish.bodyHash, row: (rows[r] as { row: number }).row, ts });
    }
    this.#evict(ts);
  }

  /** After the room gave its storage back (deleteAll): nothing is known, and nothing is left to load. */
  reset(): void {
    this.#byId.clear();
    this.#evicted.clear();
    this.#queues.h = new KeyQueue();
    this.#queues.s = new KeyQueue();
    this.#loaded = false;
  }

  // -------------------------------------------------------------------------

  #load(now: number): void {
    if (this.#loaded) return;
    this.#loaded = true;
    const counter = { rowsRead: 0 };
    for (const row of this.#history.keyedRows(now - this.#reachMs, counter, now)) {
      for (const { id, entry } of keysOf(row)) this.#add(id, entry);
    }
    this.#rowsRead(counter.rowsRead);
  }

  /**
   * A key not in memory, looked up in the rows of the keys that left it (the
   * newest of its entries within reach): nothing is read unless a filter of
   * those keys says it may be there.
   */
  #findInRows(id: string, now: number): KnownKey | null {
    const reaches = (row: number, ts: number): boolean => this.#reaches({ row, ts }, now);
    const counter = { rowsRead: 0 };
    const matches: Indexed[] = [];
    for (const span of this.#evicted.spansOf(id, reaches)) {
      // Entries are `<hash>,<id>`: rows whose keys hold `,<id>` are read, and each entry compared whole.
      for (const row of this.#history.keyedRowsContaining(`,${id}`, span.from, span.to, counter)) {
        for (const key of keysOf(row)) if (key.id === id && this.#reaches(key.entry, now)) matches.push(key.entry);
      }
      if (matches.length > 0) break;
    }
    this.#rowsRead(counter.rowsRead);
    const newest = matches.reduce<Indexed | null>((a, b) => (a === null || b.seq > a.seq ? b : a), null);
    return newest === null ? null : { seq: newest.seq, bodyHash: newest.bodyHash };
  }

  #add(id: string, entry: Indexed): void {
    const queue = this.#queues[spaceOf(id)];
    this.#byId.set(id, entry);
    queue.push(id, entry);
    while (queue.size > MAX_KEYS_PER_SPACE) {
      // Out of memory's room, not out of reach: its row still answers for it.
      const oldest = queue.items[queue.head] as { id: string; row: number; ts: number };
      this.#evicted.add(oldest.id, oldest.row, oldest.ts);
      this.#dropHead(queue);
    }
  }

  #reaches(entry: { row: number; ts: number }, now: number): boolean {
    return entry.ts >= now - this.#reachMs && this.#history.keeps(entry.row, entry.ts, now);
  }

  #evict(now: number): void {
    for (const queue of [this.#queues.h, this.#queues.s]) {
      while (queue.size > 0 && !this.#reaches(queue.items[queue.head] as { row: number; ts: number }, now)) this.#dropHead(queue);
      queue.compact();
    }
  }

  #dropHead(queue: KeyQueue): void {
    const item = queue.items[queue.head] as { id: string; seq: number };
    queue.head += 1;
    // The key may have been stored again since (a later publish once the first was out of reach).
    if (this.#byId.get(item.id)?.seq === item.seq) this.#byId.delete(item.id);
  }
}

/** A row's keyed publishes: each key's id and what the index keeps of it. */
function keysOf(row: KeyedRow): { id: string; entry: Indexed }[] {
  const keys: { id: string; entry: Indexed }[] = [];
  for (const { seq, entry } of row.entries) {
    const comma = entry.indexOf(",");
    if (comma >= 0) keys.push({ id: entry.slice(comma + 1), entry: { seq, bodyHash: entry.slice(0, comma), row: row.row, ts: row.ts } });
  }
  return keys;
}

function spaceOf(id: string): KeySpace {
  return id.startsWith("h") ? "h" : "s";
}
