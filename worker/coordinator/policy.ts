/** How the worker talks to the coordinator's shards, and the bounds of what it answers. */

/** Shard calls the worker keeps in flight for one broadcast or listing. */
export const SHARD_CONCURRENCY = 64;
/** Attempts per shard call from the worker (safe to repeat: rooms dedupe by idempotency key). */
export const SHARD_ATTEMPTS = 3;

/** Default and largest `limit` of GET /rooms. */
export const LIST_DEFAULT_LIMIT = 100;
export const LIST_MAX_LIMIT = 1000;

/** Failed room names a broadcast answer lists at most (the count is always exact). */
export const FAILED_NAMES_MAX = 100;
