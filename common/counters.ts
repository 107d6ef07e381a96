/**
 * Arithmetic on counters: a room's cumulative counters (the stats body's
 * fields) and the service's totals behind `GET /metrics`, which are sums of
 * the rooms' deltas plus what the worker counts itself.
 */
import type { RoomCounterValues } from "../protocol/http.js";

/** Service-wide sums behind `GET /metrics`: every room's counters plus the worker's own. */
export interface ServiceTotals extends RoomCounterValues {
  /** POST /broadcast requests accepted. */
  broadcasts: number;
}

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
    webhookEvents: 0,
    webhookDelivered: 0,
    webhookRequests: 0,
    webhookFailedRequests: 0,
    webhookDeadLetters: 0,
    webhookRowsWritten: 0,
    refusals: {},
  };
}

/** The counters that are plain numbers (everything but refusals by reason). */
export const NUMERIC_COUNTERS = [
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
  "webhookEvents",
  "webhookDelivered",
  "webhookRequests",
  "webhookFailedRequests",
  "webhookDeadLetters",
  "webhookRowsWritten",
] as const satisfies readonly (keyof RoomCounterValues)[];

/** `into` += `delta` (or -= with sign -1), field by field, refusals by reason. */
export function addCounters(into: RoomCounterValues, delta: RoomCounterValues, sign: 1 | -1 = 1): void {
  // Counters stored before a field existed lack it: count it from zero.
  for (const field of NUMERIC_COUNTERS) into[field] = (into[field] ?? 0) + sign * (delta[field] ?? 0);
  for (const [reason, count] of Object.entries(delta.refusals)) {
    const next = (into.refusals[reason] ?? 0) + sign * count;
    if (next === 0) delete into.refusals[reason];
    else into.refusals[reason] = next;
  }
}

export function isZeroCounters(c: RoomCounterValues): boolean {
  return NUMERIC_COUNTERS.every((field) => c[field] === 0) && Object.keys(c.refusals).length === 0;
}

export function zeroTotals(): ServiceTotals {
  return { ...zeroCounters(), broadcasts: 0 };
}

/** `into` += `delta`: room counters field by field, plus the service's own counts. */
export function addTotals(into: ServiceTotals, delta: Partial<ServiceTotals>): void {
  addCounters(into, { ...zeroTotals(), ...delta });
  into.broadcasts += delta.broadcasts ?? 0;
}
