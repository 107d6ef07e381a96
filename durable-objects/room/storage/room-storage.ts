import type { Limits } from "../../../common/settings";
import type { Retention } from "../../../common/retention";
import { RoomCounters, type StoredCounters } from "../../engine/counters";
import { History } from "./history";
import { IdempotencyKeys } from "./idempotency-keys";
import { MetaStore } from "./meta-store";
import { PublishKeys } from "./publish-keys";
import type { StoredTimes } from "./storage-reclaim";

const COUNTERS_KEY = "counters";
const NAME_KEY = "name";

/**
 * A room's SQLite storage, its parts opened together: the meta rows, the
 * history, the broadcasts' idempotency keys, the publishers' retry keys and
 * the counters the room keeps in its meta. The webhooks keep tables of their
 * own (room/webhooks/).
 */
export class RoomStorage implements StoredTimes {
  readonly meta: MetaStore;
  readonly history: History;
  readonly keys: IdempotencyKeys;
  readonly publishKeys: PublishKeys;
  readonly counters: RoomCounters;

  /** `meta` is opened first: the room's name, which its retention depends on, may be stored there. */
  constructor(storage: DurableObjectStorage, meta: MetaStore, retention: Retention, limits: Limits) {
    this.meta = meta;
    const maxAgeMs = retention.maxAgeSeconds * 1000;
    this.history = new History(storage, this.meta, { maxMessages: retention.maxMessages, maxAgeMs });
    this.keys = new IdempotencyKeys(storage.sql, maxAgeMs);
    this.counters = new RoomCounters(new StoredCounterRow(this.meta));
    const counters = this.counters;
    this.publishKeys = new PublishKeys(this.history, limits.PUBLISH_DEDUPE_SECONDS * 1000, (rows) => counters.rowsRead(rows));
  }

  /** Keeps the room's name, for an instance its alarm starts without one. */
  keepName(room: string): void {
    if (room !== "" && this.meta.get(NAME_KEY) !== room) this.meta.set(NAME_KEY, room);
  }

  get exists(): boolean {
    return this.history.exists || this.meta.exists || this.keys.exists;
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
