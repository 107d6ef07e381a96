import { logEvent } from "../common/log";
import { shardStub } from "../common/coordinator-shards";
import { addTotals, zeroTotals, type ServiceTotals } from "../common/counters";
import type { Env } from "./env";

/**
 * What the worker itself counts (refusals it answers, broadcasts it accepts),
 * kept per isolate and added to coordinator shard 0's totals at most every
 * FLUSH_INTERVAL_MS, in the background. Counting per request would add a
 * subrequest to every refusal, which is the wrong price under abuse.
 */
const FLUSH_INTERVAL_MS = 10_000;
/** The shard that holds the worker's counts. */
const WORKER_TOTALS_SHARD = 0;

let pending: ServiceTotals = zeroTotals();
let dirty = false;
let lastFlush = 0;

export function countRefusal(reason: string): void {
  pending.refusals[reason] = (pending.refusals[reason] ?? 0) + 1;
  dirty = true;
}

export function countBroadcast(): void {
  pending.broadcasts += 1;
  dirty = true;
}

/** Sends the pending counts now; on failure they stay pending for the next flush. */
export async function flushServiceCounters(env: Env): Promise<void> {
  if (!dirty) return;
  const delta = pending;
  pending = zeroTotals();
  dirty = false;
  lastFlush = Date.now();
  try {
    await shardStub(env.COORDINATOR, WORKER_TOTALS_SHARD).addTotals(delta);
  } catch (error) {
    addTotals(pending, delta);
    dirty = true;
    logEvent("error", { where: "service_counters", error: String(error) });
  }
}

/** Flushes in the background when the interval has passed. */
export function flushServiceCountersSoon(env: Env, ctx: { waitUntil(promise: Promise<unknown>): void }): void {
  if (dirty && Date.now() - lastFlush >= FLUSH_INTERVAL_MS) ctx.waitUntil(flushServiceCounters(env));
}
