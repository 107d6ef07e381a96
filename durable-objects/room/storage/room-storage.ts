import type { Limits } from "../../../common/settings";
import { MEMORY_HISTORY_MAX_BYTES, type Retention } from "../../../common/retention";
import type { SocketAttachment } from "../../engine/attachment";
import { MEMORY_ONLY, RoomCounters, type StoredCounters } from "../../engine/counters";
import { highestMark } from "../../engine/socket-mark";
import { History } from "./history";
import { MemoryHistory } from "./memory-history";
import { IdempotencyKeys } from "./idempotency-keys";
import { MetaStore } from "./meta-store";
import { PublishKeys } from "./publish-keys";
import type { RoomHistory } from "./room-history";
import type { StoredTimes } from "./storage-reclaim";

const COUNTERS_KEY = "counters";
const NAME_KEY = "name";

/**
 * A room's SQLite storage, its parts opened together: the meta rows, the
 * history, the broadcasts' idempotency keys, the publishers' retry keys and
 * the counters the room keeps in its meta. The webhooks keep tables of their
 * own (room/webhooks/). An ephemeral room (a HISTORY_RULES rule with
 * `"store": false`) keeps its history and counters in memory instead.
 */
export class RoomStorage implements StoredTimes {
  readonly meta: MetaStore;
  /** The room's messages: in SQLite, or in memory for an ephemeral room. */
  readonly history: RoomHistory;
  readonly keys: IdempotencyKeys;
  readonly publishKeys: PublishKeys;
  readonly counters: RoomCounters;

  /**
   * `meta` is opened first: the room's name, which its retention depends on, may be stored there.
   * `attachments`: the room's sockets' attachments, where an ephemeral room woken from hibernation
   * finds where it stood (engine/socket-mark.ts).
   */
  constructor(storage: DurableObjectStorage, meta: MetaStore, retention: Retention, limits: Limits, attachments: () => (SocketAttachment | null)[]) {
    this.meta = meta;
    const maxAgeMs = retention.maxAgeSeconds * 1000;
    this.history = retention.store
      ? new History(storage, this.meta, { maxMessages: retention.maxMessages, maxAgeMs })
      : new MemoryHistory({ maxMessages: retention.maxMessages, maxAgeMs, maxBytes: MEMORY_HISTORY_MAX_BYTES }, highestMark(attachments()));
    this.keys = new IdempotencyKeys(storage.sql, maxAgeMs);
    // An ephemeral room writes no row for its counters either (one every few seconds while busy):
    // they live in memory, reported to the registry as every room's are.
    this.counters = new RoomCounters(this.history.durable ? new StoredCounterRow(this.meta) : MEMORY_ONLY);
    const counters = this.counters;
    this.publishKeys = new PublishKeys(this.history, limits.PUBLISH_DEDUPE_SECONDS * 1000, (rows) => counters.rowsRead(rows));
  }

  /** Keeps the room's name, for an instance its alarm starts without one. */
  keepName(room: string): void {
    if (room !== "" && this.meta.get(NAME_KEY) !== room) this.meta.set(NAME_KEY, room);
  }

  get exists(): boolean {
    return (this.history.durable && this.history.exists) || this.meta.exists || this.keys.exists;
  }

  latestTs(): number {
    return this.history.latestTs;
  }

  newestKeyTs(): number {
    return this.keys.newestTs();
  }

  /** The storage was deleted: what memory knew of it goes too. */
  reset(): void {
    this.meta.reset();
    this.history.reset();
    this.keys.reset();
    this.publishKeys.reset();
    this.counters.reset();
  }
}

/** The name the room stored with its first write (an instance its alarm starts after a restart has no other). */
export function storedRoomName(meta: MetaStore): string | null {
  return meta.get(NAME_KEY);
}

/** The room's counters, kept as one meta row. */
class StoredCounterRow {
  readonly #meta: MetaStore;

  constructor(meta: MetaStore) {
    this.#meta = meta;
  }

  load(): StoredCounters | null {
    const stored = this.#meta.get(COUNTERS_KEY);
    return stored ? (JSON.parse(stored) as StoredCounters) : null;
  }

  save(stored: StoredCounters): void {
    this.#meta.set(COUNTERS_KEY, JSON.stringify(stored));
  }
}
