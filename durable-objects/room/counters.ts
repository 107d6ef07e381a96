import type { RoomCounterValues } from "../../client-sdk/src/protocol";
import type { History } from "./history";

/** How often counters are written at most: one row write per interval per active room. */
const PERSIST_INTERVAL_MS = 5000;
const META_KEY = "counters";

export function zeroCounters(): RoomCounterValues {
  return { published: 0, framesSent: 0, bytesSent: 0, deliveries: 0, drops: 0, kicks: 0, refusals: {} };
}

/** `into` += `delta` (or -= with sign -1), field by field, refusals by reason. */
export function addCounters(into: RoomCounterValues, delta: RoomCounterValues, sign: 1 | -1 = 1): void {
  into.published += sign * delta.published;
  into.framesSent += sign * delta.framesSent;
  into.bytesSent += sign * delta.bytesSent;
  into.deliveries += sign * delta.deliveries;
  into.drops += sign * delta.drops;
  into.kicks += sign * delta.kicks;
  for (const [reason, count] of Object.entries(delta.refusals)) {
    const next = (into.refusals[reason] ?? 0) + sign * count;
    if (next === 0) delete into.refusals[reason];
    else into.refusals[reason] = next;
  }
}

function isZero(c: RoomCounterValues): boolean {
  return (
    c.published === 0 && c.framesSent === 0 && c.bytesSent === 0 && c.deliveries === 0 && c.drops === 0 && c.kicks === 0 &&
    Object.keys(c.refusals).length === 0
  );
}

interface Stored {
  values: RoomCounterValues;
  /** What the registry has been told so far; the difference is the next report's delta. */
  reported: RoomCounterValues;
}

/**
 * A room's cumulative counters, kept across hibernation and restarts so that
 * stats and metrics only ever grow. Writing them on every change would double
 * the storage writes of a publish; instead they are written at most every few
 * seconds, with a timer for the tail so a room that goes quiet (and then
 * hibernates) has written its last counts first.
 *
 * The registry learns them as deltas: each report carries what grew since the
 * last report that succeeded, so service-wide totals are sums of deltas and
 * survive rooms coming and going.
 */
export class RoomCounters {
  readonly values: RoomCounterValues;
  readonly #reported: RoomCounterValues;
  readonly #history: History;
  #lastPersist = 0;
  #timer: ReturnType<typeof setTimeout> | null = null;

  constructor(history: History) {
    this.#history = history;
    const stored = history.meta(META_KEY);
    const parsed = stored ? (JSON.parse(stored) as Partial<Stored>) : {};
    this.values = { ...zeroCounters(), ...parsed.values };
    this.#reported = { ...zeroCounters(), ...parsed.reported };
  }

  refused(reason: string): void {
    this.values.refusals[reason] = (this.values.refusals[reason] ?? 0) + 1;
    this.changed();
  }

  /** What grew since the last successful report, or null when nothing did. */
  unreported(): RoomCounterValues | null {
    const delta = structuredClone(this.values);
    addCounters(delta, this.#reported, -1);
    return isZero(delta) ? null : delta;
  }

  /** The registry has counted `delta`. */
  reported(delta: RoomCounterValues): void {
    addCounters(this.#reported, delta);
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
    const stored: Stored = { values: this.values, reported: this.#reported };
    this.#history.setMeta(META_KEY, JSON.stringify(stored));
  }
}
