import type { RoomCounterValues } from "../../../protocol";
import type { GiveBackAnswer } from "../../coordinator/room-contract";
import { KEY_MIN_AGE_MS } from "./idempotency-keys";

/** What giving a room's storage back needs to know and do. */
export interface ReclaimHost {
  /** Whether the room holds any storage at all. */
  storageExists(): boolean;
  /** Anything else that keeps the storage until a time (a socket that just left, dead webhook events: docs/webhooks.md); 0 when nothing does. */
  heldUntil?(): number;
  /** Sockets anywhere (here or on the objects that follow the room), or webhook events still to send: the room says when it is done. */
  inUse(): boolean;
  /** Something that needs the storage will be done shortly: leaves still listed in it (they retire), a write in flight. */
  busy(): boolean;
  /** Counters not yet reported. */
  unreported(): RoomCounterValues | null;
  /** Deletes the storage and forgets what memory knew of it. */
  reclaim(): Promise<void>;
}

/** When the room's newest message was published (0 when none), and its newest idempotency key stored. */
export interface StoredTimes {
  latestTs(): number;
  newestKeyTs(): number;
}

/** A busy room is asked again after this long (an empty leaf retires within ROOM_LEAF_RETIRE_MS, a write within a flush). */
const BUSY_RECHECK_MS = 10_000;

/**
 * A room with no sockets whose history has aged out (and whose idempotency
 * keys have expired) gives its storage back, so that names used once do not
 * keep storage forever. Its next use starts a new history under a new epoch.
 *
 * The room's coordinator shard asks it, by name, once the time the room gave
 * it has come (the directory's `due`, durable-objects/coordinator/storage-sweep.ts):
 * the room needs no alarm of its own for it, and so is never started without
 * its name to do it. Its counters go back with the answer.
 */
export class StorageReclaim {
  readonly #host: ReclaimHost;
  readonly #stored: StoredTimes;
  readonly #historyMaxAgeMs: number;

  constructor(host: ReclaimHost, stored: StoredTimes, historyMaxAgeMs: number) {
    this.#host = host;
    this.#stored = stored;
    this.#historyMaxAgeMs = historyMaxAgeMs;
  }

  /** When to ask the room next, as it stands (null: it will say, or it holds nothing). */
  dueAt(): number | null {
    if (!this.#host.storageExists() || this.#host.inUse()) return null;
    return this.#due();
  }

  /** The shard asks: the storage goes if nothing can still ask for it, or the room says when to ask again. */
  async giveBack(now: number): Promise<GiveBackAnswer> {
    if (!this.#host.storageExists()) return { gone: true, delta: null };
    if (this.#host.inUse()) return { gone: false, due: null };
    const due = this.#due();
    if (now < due) return { gone: false, due };
    if (this.#host.busy()) return { gone: false, due: now + BUSY_RECHECK_MS };
    const delta = this.#host.unreported();
    await this.#host.reclaim();
    return { gone: true, delta };
  }

  /** When the storage holds nothing anyone can still ask for. */
  #due(): number {
    const keys = this.#stored.newestKeyTs();
    return Math.max(this.#stored.latestTs() + this.#historyMaxAgeMs, keys > 0 ? keys + KEY_MIN_AGE_MS : 0, this.#host.heldUntil?.() ?? 0);
  }
}
