/**
 * Close codes, and the one table that decides what a client does after each:
 * `reconnect: true` means reconnect with backoff and resume with `since`;
 * `false` means stop (the same request would be refused again). A code the
 * table does not know is decided by its range, as centrifuge-js decides
 * (STOP_RANGES): 3500-3999 and 4500-4999 are reasons to stop (a library's,
 * or a newer server's); everything else (1005 and 1006, network failures,
 * other standard codes, 3000-3499, 4000-4499) means reconnect: a client never
 * stops for a transient reason it cannot name.
 */

/**
 * The close codes of this protocol by name; what each means for reconnecting is in CLOSE_CODES.
 *
 * @example
 * ```ts
 * function explain(code: number): string {
 *   if (code === CloseCode.UNAUTHORIZED) return "sign in again";
 *   return code === CloseCode.FORBIDDEN ? "no access to this room" : "reconnecting";
 * }
 * ```
 *
 * @see docs/protocol.md#close-codes
 */
export const CloseCode = {
  /** The client or server ended the session on purpose. */
  NORMAL: 1000,
  /** The server is going away (deploy, shutdown of the object). */
  GOING_AWAY: 1001,
  /** A frame was larger than the room accepts. */
  MESSAGE_TOO_BIG: 1009,
  /** Unexpected server error; safe to retry. */
  INTERNAL_ERROR: 1011,
  /** Service restart (local server shutdown, deploy). Reconnect and resume. */
  SERVICE_RESTART: 1012,
  /** Temporary overload. */
  TRY_AGAIN_LATER: 1013,
  /** The client sent a frame that is not valid protocol (bad JSON, unknown type, bad field, an ack for a message it was not sent). */
  BAD_FRAME: 4000,
  /** The token is missing, invalid or expired. */
  UNAUTHORIZED: 4001,
  /** The token does not allow this room or this action. */
  FORBIDDEN: 4003,
  /** The socket fell behind and acknowledged nothing for SLOW_GRACE_MS. Reconnect and resume. */
  SLOW_CONSUMER: 4008,
  /** The client sent frames faster than its rate limit. */
  RATE_LIMITED: 4009,
  /** No heartbeat or frame from the client within the idle timeout. */
  IDLE_TIMEOUT: 4010,
} as const;

export type CloseCodeName = keyof typeof CloseCode;
export type CloseCodeValue = (typeof CloseCode)[CloseCodeName];

export interface CloseCodeInfo {
  name: CloseCodeName;
  /** Whether a client should reconnect (with backoff, resuming with `since`). */
  reconnect: boolean;
  description: string;
}

/**
 * The one table that decides reconnect versus stop; docs/protocol.md mirrors it (a test holds them together).
 *
 * @see docs/protocol.md#close-codes
 */
export const CLOSE_CODES: Readonly<Record<CloseCodeValue, CloseCodeInfo>> = {
  1000: { name: "NORMAL", reconnect: false, description: "closed on purpose" },
  1001: { name: "GOING_AWAY", reconnect: true, description: "server going away" },
  1009: { name: "MESSAGE_TOO_BIG", reconnect: true, description: "client frame far over the size limit (a message over it is refused without closing)" },
  1011: { name: "INTERNAL_ERROR", reconnect: true, description: "unexpected server error" },
  1012: { name: "SERVICE_RESTART", reconnect: true, description: "service restart; resume with since" },
  1013: { name: "TRY_AGAIN_LATER", reconnect: true, description: "temporary overload" },
  4000: { name: "BAD_FRAME", reconnect: false, description: "invalid client frame" },
  4001: { name: "UNAUTHORIZED", reconnect: false, description: "missing, invalid or expired token" },
  4003: { name: "FORBIDDEN", reconnect: false, description: "token does not allow this" },
  4008: { name: "SLOW_CONSUMER", reconnect: true, description: "behind with no acknowledged progress for too long; resume with since" },
  4009: { name: "RATE_LIMITED", reconnect: true, description: "client frames over the rate limit" },
  4010: { name: "IDLE_TIMEOUT", reconnect: true, description: "no heartbeat within the idle timeout" },
};

/**
 * The ranges of codes the table does not know that mean stop. New codes this
 * service adds that mean stop are given from 4500 on, so a client written
 * before them stops too; those that mean reconnect stay below 4500.
 */
export const STOP_RANGES: readonly (readonly [number, number])[] = [
  [3500, 3999],
  [4500, 4999],
];

/**
 * Whether a client should reconnect after a close with `code`: the table's
 * word for a code it knows, else the code's range (STOP_RANGES stop, anything
 * else reconnects: 1005/1006 abnormal closures and network failures among them).
 *
 * @param code the close code the socket ended with.
 * @returns true to reconnect with backoff (resuming with `since`), false to stop.
 *
 * @example
 * ```ts
 * shouldReconnect(CloseCode.SLOW_CONSUMER); // true: come back and resume
 * shouldReconnect(CloseCode.FORBIDDEN); // false: the same request would be refused again
 * shouldReconnect(4600); // false: an unknown code in a stop range
 * ```
 *
 * @see docs/protocol.md#close-codes
 */
export function shouldReconnect(code: number): boolean {
  const info = (CLOSE_CODES as Readonly<Record<number, CloseCodeInfo | undefined>>)[code];
  if (info) return info.reconnect;
  return !STOP_RANGES.some(([low, high]) => code >= low && code <= high);
}

/** A close reason is at most 123 bytes of UTF-8 (RFC 6455 5.5: 125 for the payload, 2 of them the code). */
export const MAX_CLOSE_REASON_BYTES = 123;

/** `text` cut to fit a close frame's reason, on a code point boundary. */
export function closeReason(text: string): string {
  const encoder = new TextEncoder();
  if (encoder.encode(text).length <= MAX_CLOSE_REASON_BYTES) return text;
  // Whole code points, so the cut never leaves half a surrogate pair.
  const chars = [...text];
  while (chars.length > 0 && encoder.encode(`${chars.join("")}…`).length > MAX_CLOSE_REASON_BYTES) chars.pop();
  return `${chars.join("")}…`;
}
