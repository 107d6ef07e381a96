import { logEvent } from "../../../common/log";
import { KEY_MIN_AGE_MS } from "./idempotency-keys";

/** What giving a room's storage back needs to know and do. */
export interface ReclaimHost {
  /** Whether the room holds any storage at all. */
  storageExists(): boolean;
  /** Anything else that keeps the storage until a time (dead webhook events: docs/webhooks.md); 0 when nothing does. */
  heldUntil?(): number;
  /** True when nothing in flight still needs storage: counters reported, no leaves (their directory is in it). */
  quiet(): boolean;
  /** The room is empty: it reports what is unreported, because storage is about to go. */
  reportEmpty(): void;
  /** Deletes the storage and forgets what memory knew of it. */
  reclaim(): Promise<void>;
  name(): string | null;
}

/** When the room's newest message was published (0 when none), and its newest idempotency key stored. */
export interface StoredTimes {
  latestTs(): number;
  newestKeyTs(): number;
}

/** How long to wait before trying again when an empty room still has counters to report. */
const RETRY_MS = 10_000;

/**
 * A room with no sockets whose history has aged out (and whose idempotency
 * keys have expired) gives its storage back, so that names used once do not
 * keep storage forever. Its next use starts a new history under a new epoch.
 * Runs from the room's alarm when it has no sockets anywhere.
 */
export class StorageReclaim {
  readonly #host: ReclaimHost;
  readonly #stored: StoredTimes;
  readonly #historyMaxAgeMs: number;
  #retryAt = 0;

  constructor(host: ReclaimHost, stored: StoredTimes, historyMaxAgeMs: number) {
    this.#host = host;
    this.#stored = stored;
    this.#historyMaxAgeMs = historyMaxAgeMs;
  }

  /** When the alarm should run for this (null: the room holds nothing). */
  alarmAt(now: number): number | null {
    if (!this.#host.storageExists()) return null;
    return Math.max(this.#due(), this.#retryAt, now + 1000);
  }

  async onAlarm(now: number): Promise<void> {
    if (!this.#host.storageExists() || now < this.#due()) return;
    if (!this.#host.quiet()) {
      this.#host.reportEmpty();
      this.#retryAt = now + RETRY_MS;
      return;
    }
    this.#retryAt = 0;
    try {
      await this.#host.reclaim();
    } catch (error) {
      logEvent("error", { room: this.#host.name(), where: "reclaim", error: String(error) });
    }
  }

  /** When the storage holds nothing anyone can still ask for. */
  #due(): number {
    const keys = this.#stored.newestKeyTs();
    return Math.max(this.#stored.latestTs() + this.#historyMaxAgeMs, keys > 0 ? keys + KEY_MIN_AGE_MS : 0, this.#host.heldUntil?.() ?? 0);
  }
}
