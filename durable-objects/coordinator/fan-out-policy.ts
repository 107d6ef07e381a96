/** How a shard fans a broadcast out to its rooms. */

/** Room publishes a shard keeps in flight during a fan-out. */
export const FANOUT_CONCURRENCY = 50;
/** Attempts per room (the first one included) before a room is reported failed. */
export const FANOUT_ATTEMPTS = 3;
/** Base of the full-jitter backoff between fan-out rounds, doubled per round. */
export const FANOUT_BACKOFF_MS = 100;
