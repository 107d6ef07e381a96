import type { RoomCounterValues } from "../../protocol";
import { addCounters, isZeroCounters, zeroCounters } from "../../common/counters";
import { logEvent } from "../../common/log";
import type { Frame } from "./frames";

/** How often counters are written at most: one row write per interval per active room. */
const PERSIST_INTERVAL_MS = 5000;
/** How long after the interval the tail is written when nothing else wrote it. */
const TAIL_SLACK_MS = 2000;

/** Counters as stored: the values, and what the registry has been told so far (the difference is the next report's delta). */
export interface StoredCounters {
  values: RoomCounterValues;
  reported: RoomCounterValues;
}

/** Where counters are kept across restarts; a leaf keeps them in memory only and reports them to its root. */
export interface CounterStore {
  load(): StoredCounters | null;
  save(stored: StoredCounters): void;
}

/** A store that keeps nothing: counters live in memory until reported. */
export const MEMORY_ONLY: CounterStore = { load: () => null, save: () => {} };

/**
 * An object's cumulative counters (what `GET /rooms/{room}` shows and the
 * registry sums for `/metrics`), changed only through the verbs below.
 *
 * A room keeps them across hibernation and restarts, so that stats and
 * metrics only ever grow. Writing them on every change would double the
 * storage writes of a publish; instead they are written at most every few
 * seconds, with a timer for the tail so a room that goes quiet (and then
 * hibernates) has written its last counts first. With a memory-only store
 * nothing is written and no timer runs (a pending timer keeps an object from
 * hibernating, and is billed as duration).
 *
 * The registry learns them as deltas: each report carries what grew since the
 * last report that succeeded, so service-wide totals are sums of deltas and
 * survive rooms coming and going.
 */
export class RoomCounters {
  readonly #values: RoomCounterValues;
  readonly #reported: RoomCounterValues;
  readonly #store: CounterStore;
  readonly #persists: boolean;
  #lastPersist = 0;
  #timer: ReturnType<typeof setTimeout> | null = null;

  constructor(store: CounterStore) {
    this.#store = store;
    this.#persists = store !== MEMORY_ONLY;
    const stored = store.load();
    // Field by field, so counters stored by an older version (with fields since retired) read cleanly.
    this.#values = zeroCounters();
    this.#reported = zeroCounters();
    if (stored?.values) addCounters(this.#values, { ...zeroCounters(), ...stored.values });
    if (stored?.reported) addCounters(this.#reported, { ...zeroCounters(), ...stored.reported });
  }

  /** The counters as they stand (read-only: change them with the verbs). */
  get values(): Readonly<RoomCounterValues> {
    return this.#values;
  }

  /** A copy of the counters. */
  snapshot(): RoomCounterValues {
    return structuredClone(this.#values);
  }

  /** `frame` went out live to `sockets` sockets. */
  sent(sockets: number, frame: Frame): void {
    const v = this.#values;
    v.framesSent += sockets;
    v.bytesSent += sockets * frame.bytes;
    v.deliveries += sockets * frame.count;
  }

  /** `frame` went out from history to one socket catching up. */
  caughtUp(frame: Frame): void {
    this.sent(1, frame);
    this.#values.catchUpFrames += 1;
    this.changed();
  }

  rowsRead(rows: number): void {
    if (rows === 0) return;
    this.#values.historyRowsRead += rows;
    this.changed();
  }

  /** A flush stored `messages` messages in `rows` rows. */
  stored(messages: number, rows: number): void {
    this.#values.published += messages;
    this.#values.historyRowsWritten += rows;
    this.changed();
  }

  /** One socket was told it lost `messages` messages. */
  lost(messages: number): void {
    this.#values.lostMessages += messages;
    this.changed();
  }

  /** A socket was closed as a slow consumer. */
  kicked(): void {
    this.#values.kicks += 1;
    this.changed();
  }

  presenceSent(events: number): void {
    if (events === 0) return;
    this.#values.presenceEvents += events;
    this.changed();
  }

  /** `events` webhook events were recorded, and the webhook parts wrote `rows` rows (docs/webhooks.md). */
  webhookRecorded(events: number, rows: number): void {
    if (events === 0 && rows === 0) return;
    this.#values.webhookEvents += events;
    this.#values.webhookRowsWritten += rows;
    this.changed();
  }

  /** One webhook request went out: `delivered` events acknowledged (0 when it failed), and the rows deleting them cost. */
  webhookSent(delivered: number, ok: boolean, rows: number): void {
    this.#values.webhookRequests += 1;
    if (!ok) this.#values.webhookFailedRequests += 1;
    this.#values.webhookDelivered += delivered;
    this.#values.webhookRowsWritten += rows;
    this.changed();
  }

  /** `events` webhook events became dead letters, at the cost of `rows` rows. */
  webhookDead(events: number, rows: number): void {
    this.#values.webhookDeadLetters += events;
    this.#values.webhookRowsWritten += rows;
    this.changed();
  }

  refused(reason: string): void {
    this.#values.refusals[reason] = (this.#values.refusals[reason] ?? 0) + 1;
    this.changed();
  }

  /** Counts another object of the room reported (a leaf's delta). */
  add(delta: RoomCounterValues): void {
    addCounters(this.#values, delta);
    this.changed();
  }

  /** After the room gave its storage back: counting starts over. */
  reset(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    Object.assign(this.#values, zeroCounters());
    Object.assign(this.#reported, zeroCounters());
  }

  /** What grew since the last successful report, or null when nothing did. */
  unreported(): RoomCounterValues | null {
    const delta = structuredClone(this.#values);
    addCounters(delta, this.#reported, -1);
    return isZeroCounters(delta) ? null : delta;
  }

  /** The registry (or the root) has counted `delta`. */
  reported(delta: RoomCounterValues): void {
    addCounters(this.#reported, delta);
    this.changed();
  }

  /**
   * Call after any change. Persists now when the interval has passed (inside
   * the caller's event, so in the same commit as whatever it wrote);
   * otherwise a timer writes the tail a little after the interval, unless a
   * later change in a busy room has written it first. A timer firing right at
   * the interval would cost a busy room a commit of its own every interval.
   */
  changed(): void {
    if (!this.#persists) return;
    const wait = this.#lastPersist + PERSIST_INTERVAL_MS - Date.now();
    if (wait <= 0) {
      this.persistNow();
      return;
    }
    this.#timer ??= setTimeout(() => {
      this.#timer = null;
      this.#persist();
    }, wait + TAIL_SLACK_MS);
  }

  /** Writes now (before a planned shutdown). */
  persistNow(): void {
    if (!this.#persists) return;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    this.#persist();
  }

  #persist(): void {
    this.#lastPersist = Date.now();
    try {
      this.#store.save({ values: this.#values, reported: this.#reported });
    } catch (error) {
      // Counters are best effort; a failing write must not take a timer callback (and the room) down.
      logEvent("error", { where: "counters", error: String(error) });
    }
  }
}
