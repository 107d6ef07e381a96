/** What a publish comes to, as the room answers it (its RPC) and the objects that forward publishes to it pass on. */

/** A message the room published, or recognised as published already. */
export interface PublishResult {
  /** The message's position in the room's history. */
  seq: number;
  /**
   * Sockets the message was sent to live (sockets catching up get it from history); in a
   * sharded room, plus the sockets of the leaves it was pushed to, as of their last reports.
   */
  recipients: number;
  /** True when the idempotency key was already published; nothing was sent again. */
  duplicate: boolean;
}

/**
 * A message the room's beforePublish hook refused (or could not check, or
 * transformed past MAX_MESSAGE_BYTES). The worker answers an HTTP publisher
 * with the status of `error` and `{"error","message"}`; a socket publisher
 * gets an `error` event with it.
 */
export interface PublishRefused {
  /** `conflict`: the publish's idempotency key was already published with another body (no hook gives it). */
  error: "bad_request" | "forbidden" | "rate_limited" | "too_large" | "conflict" | "internal";
  /** Why, in words for people (a hook refusal's `refuse`). */
  message: string;
}

/** A publish's idempotency key as a socket sent it, with a hash of its data as sent (common/body-hash.ts). */
export interface RetryKey {
  key: string;
  bodyHash: string;
}

/** What a publish came to: published (or recognised as a duplicate), or refused by the room's hook. */
export type PublishOutcome = PublishResult | { refused: PublishRefused };
