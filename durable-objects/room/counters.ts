import type { RoomCounterValues } from "../../protocol";
import { logEvent } from "../../common/log";
import type { History } from "./history";

/** How often counters are written at most: one row write per interval per active room. */
const PERSIST_INTERVAL_MS = 5000;
/** How long after the interval the tail is written when nothing else wrote it. */
const TAIL_SLACK_MS = 2000;
const META_KEY = "counters";

export function zeroCounters(): RoomCounterValues {
  return {
    published: 0,
    framesSent: 0,
    bytesSent: 0,
    deliveries: 0,
    catchUpFrames: 0,
    historyRowsRead: 0,
    historyRowsWritten: 0,
    lostMessages: 0,
    kicks: 0,
    presenceEvents: 0,
    refusals: {},
  };
}

/** The counters that are plain numbers (everything but refusals by reason). */
const NUMERIC_FIELDS = [
  "published",
  "framesSent",
  "bytesSent",
  "deliveries",
  "catchUpFrames",
  "historyRowsRead",
  "historyRowsWritten",
  "lostMessages",
  "kicks",
  "presenceEvents",
] as const satisfies readonly (keyof RoomCounterValues)[];

/** `into` += `delta` (or -= with sign -1), field by field, refusals by reason. */
export function addCounters(into: RoomCounterValues, delta: RoomCounterValues, sign: 1 | -1 = 1): void {
  // Counters stored before a field existed lack it: count it from zero.
  for (const field of NUMERIC_FIELDS) into[field] = (into[field] ?? 0) + sign * (delta[field] ?? 0);
  for (const [reason, count] of Object.entries(delta.refusals)) {
    const next = (into.refusals[reason] ?? 0) + sign * count;
    if (next === 0) delete into.refusals[reason];
    else into.refusals[reason] = next;
  }
}

function isZero(c: RoomCounterValues): boolean {
  return NUMERIC_FIELDS.every((field) => c[field] === 0) && Object.keys(c.refusals).length === 0;
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
  readonly #history: Pick<History, "meta" | "setMeta">;
  #lastPersist = 0;
  #timer: ReturnType<typeof setTimeout> | null = null;

  constructor(history: Pick<History, "meta" | "setMeta">) {
    this.#history = history;
    const stored = history.meta(META_KEY);
    const parsed = stored ? (JSON.parse(stored) as Partial<Stored>) : {};
    // Field by field, so counters stored by an older version (with fields since retired) read cleanly.
    this.values = zeroCounters();
    this.#reported = zeroCounters();
    if (parsed.values) addCounters(this.values, { ...zeroCounters(), ...parsed.values });
    if (parsed.reported) addCounters(this.#reported, { ...zeroCounters(), ...parsed.reported });
  }

  /** After the room gave its storage back: counting starts over. */
  reset(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    Object.assign(this.values, zeroCounters());
    Object.assign(this.#reported, zeroCounters());
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

  /**
   * Call after any change. Persists now when the interval has passed (inside
   * the caller's event, so in the same commit as whatever it wrote);
   * otherwise a timer writes the tail a little after the interval, unless a
   * later change in a busy room has written it first. A timer firing right at
   * the interval would cost a busy room a commit of its own every interval.
   */
  changed(): void {
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
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    this.#persist();
  }

  #persist(): void {
    this.#lastPersist = Date.now();
    const stored: Stored = { values: this.values, reported: this.#reported };
    try {
      this.#history.setMeta(META_KEY, JSON.stringify(stored));
    } catch (error) {
      // Counters are best effort; a failing write must not take a timer callback (and the room) down.
      logEvent("error", { where: "counters", error: String(error) });
    }
  }
}
