/**
 * The service's limits and their defaults. Deployments override them with
 * wrangler.toml vars of the same name; these are the values used when a var
 * is absent. They are the server's business: what a client needs of them is
 * announced in the welcome event, so none of this ships in the browser SDK.
 */
export const DEFAULTS = {
  /** Largest message, bytes of its data as stored JSON text (HTTP body or socket publish). */
  MAX_MESSAGE_BYTES: 64 * 1024,
  /** Largest client frame, bytes; larger frames close the socket with 1009. */
  MAX_FRAME_BYTES: 64 * 1024,
  /** Messages kept in a room's history for resume and catch-up. */
  HISTORY_MAX_MESSAGES: 1000,
  /** Age after which history messages are no longer served, seconds. */
  HISTORY_MAX_AGE_SECONDS: 120,
  /** Unacknowledged bytes the room sends a socket before waiting for its ack (0 = no window). */
  WINDOW_BYTES: 1024 * 1024,
  /** Milliseconds a socket may stay behind without acknowledging anything before it is closed with SLOW_CONSUMER. */
  SLOW_GRACE_MS: 10_000,
  /** Upper bound of one coalesced frame, bytes (a single larger message is still sent alone). */
  BATCH_MAX_BYTES: 64 * 1024,
  /** Upper bound of one coalesced frame, events. */
  BATCH_MAX_EVENTS: 256,
  /** Extra milliseconds to wait for more messages before a flush; 0 = never wait. */
  FLUSH_DELAY_MS: 0,
  /** A socket with no ping and no frame for this long is closed with IDLE_TIMEOUT. */
  IDLE_TIMEOUT_SECONDS: 90,
  /** Sockets one room accepts; kept below the platform's 32,768 hibernatable sockets per object. */
  MAX_SOCKETS_PER_ROOM: 32_000,
  /** Sustained client frames per second per socket, besides heartbeats and acks that release a frame. */
  CLIENT_FRAMES_PER_SECOND: 20,
  /** Client frames a socket may send in a burst above the sustained rate. */
  CLIENT_FRAME_BURST: 60,
  /** Names one explicit POST /broadcast `rooms` list may hold. */
  BROADCAST_MAX_ROOMS: 1000,
  /** Live-room registry shards (a room belongs to shard hash(name) mod this). */
  COORDINATOR_SHARDS: 16,
} as const;

export type Limits = { -readonly [K in keyof typeof DEFAULTS]: number };

/**
 * Reads every limit from the environment's vars, falling back to the
 * defaults. A var that is not a non-negative integer is ignored (and logged)
 * rather than taking the service down.
 */
export function readLimits(env: Record<string, unknown>): Limits {
  const limits = { ...DEFAULTS } as Limits;
  for (const key of Object.keys(DEFAULTS) as (keyof Limits)[]) {
    const raw = env[key];
    if (raw === undefined || raw === null || raw === "") continue;
    const value = Number(raw);
    if (Number.isSafeInteger(value) && value >= 0) {
      limits[key] = value;
    } else {
      console.warn(JSON.stringify({ event: "bad_config", var: key, value: String(raw) }));
    }
  }
  return limits;
}
