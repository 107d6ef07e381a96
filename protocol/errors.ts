/**
 * Error codes: in HTTP JSON bodies (`{"error": code, "message": text}`) and in
 * `error` events on a socket. A client decides by the code; the message is
 * for people.
 */
export type ErrorCode =
  | "bad_room"
  | "bad_request"
  | "bad_json"
  | "bad_frame"
  | "too_large"
  | "upgrade_required"
  | "unauthorized"
  | "forbidden"
  | "not_found"
  | "method_not_allowed"
  | "room_full"
  | "over_capacity"
  | "rate_limited"
  /** A multiplexed connection already follows MAX_ROOMS_PER_CONNECTION rooms. */
  | "too_many_rooms"
  /** A multiplexed connection named a room it does not follow. */
  | "not_subscribed"
  /** An idempotency key that was already published with another body. */
  | "conflict"
  | "internal";

/** Every refusal over HTTP is a status with this body. */
export interface ErrorBody {
  /** What went wrong, for a client to decide by. */
  error: ErrorCode;
  /** What went wrong, in words for people. */
  message: string;
}
