import type { RoomCounterValues } from "../../client-sdk/src/protocol";
import type { History } from "./history";

/** How often counters are written at most: one row write per interval per active room. */
const PERSIST_INTERVAL_MS = 5000;
const META_KEY = "counters";

function zero(): RoomCounterValues {
  return { framesSent: 0, bytesSent: 0, deliveries: 0, drops: 0, kicks: 0, refusals: {} };
}

/**
 * A room's cumulative counters, kept across hibernation and restarts so that
 * stats and metrics only ever grow. Writing them on every change would double
 * the storage writes of a publish; instead they are written at most every few
 * seconds, with a timer for the tail so a room that goes quiet (and then
 * hibernates) has written its last counts first.
 */
export class RoomCounters {
  readonly values: RoomCounterValues;
  readonly #history: History;
  #lastPersist = 0;
  #timer: ReturnType<typeof setTimeout> | null = null;

  constructor(history: History) {
    this.#history = history;
    const stored = history.meta(META_KEY);
    this.values = stored ? { ...zero(), ...(JSON.parse(stored) as Partial<RoomCounterValues>) } : zero();
  }

  refused(reason: string): void {
    this.values.refusals[reason] = (this.values.refusals[reason] ?? 0) + 1;
    this.changed();
  }

  /** Call after any change; persists now or schedules it. */
  changed(): void {
    if (this.#timer) return;
    const wait = this.#lastPersist + PERSIST_INTERVAL_MS - Date.now();
    if (wait <= 0) {
      this.#persist();
      return;
    }
    this.#timer = setTimeout(() => {
      this.#timer = null;
      this.#persist();
    }, wait);
  }

  /** Writes now (before a planned shutdown). */
  persistNow(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    this.#persist();
  }

  #persist(): void {
    this.#lastPersist = Date.now();
    this.#history.setMeta(META_KEY, JSON.stringify(this.values));
  }
}
